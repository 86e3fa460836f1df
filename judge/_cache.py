"""Cached folders that heal: each is published with a manifest of its files, checked on every load.

What is cached under :func:`judge.models.cache_dir`: the packaged GGUF models converted to
safetensors (``models/``) and the packaged sentence embedder extracted from its zip
(``encoders/``). Each folder is filled in a private sibling, then its manifest
(``.judge-manifest.json``: every file's size, SHA-256 and stat stamp) is written last, and the
folder is renamed into place, so a folder without a manifest was never finished (or was written by
a trie-judge from before manifests).

The check on load (:func:`damage`) costs a ``stat`` per file: sizes always; the SHA-256 of files up
to :data:`ALWAYS_HASH_BYTES` (config, tokenizer: about 10 ms); a large file (the weights) is hashed
only when its stat stamp (mtime, ctime) is not the one recorded at write, as git's index does, so
anything written to it since (truncation, an edit, a copy) is hashed and caught, while an untouched
file costs nothing. A damaged folder is rebuilt from its packaged source with a one-line
:class:`CacheWarning` (:func:`cached`); where no source is installed, :class:`CacheError` names the
folder to delete.

What it deliberately does not do: hash every byte of the weights on every load (0.5-0.7 s for the
538 MB SmolLM2 file, as long as the load itself); a flip in a large file that leaves its stamp as
written (bit rot on disk) is caught only when loading it then fails, where the caller asks for a full
check (``full=True``) and rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path

__all__ = ["MANIFEST", "ALWAYS_HASH_BYTES", "CacheError", "CacheWarning", "damage", "write_manifest",
           "publish_folder", "cached"]

#: The manifest's file name inside each cached folder.
MANIFEST = ".judge-manifest.json"
_FORMAT = "trie-judge/cache-manifest"
_VERSION = 1
#: Files up to this size are hashed on every load; larger ones only when their stat stamp changed.
ALWAYS_HASH_BYTES = 16 * 1024**2


class CacheError(OSError):
    """A cached folder is damaged and cannot be rebuilt here (its packaged source is not installed); the
    message names the folder to delete.

    Examples
    --------
    >>> issubclass(CacheError, OSError)
    True
    """


class CacheWarning(UserWarning):
    """A cached folder was found damaged and is being rebuilt from its packaged source (one line).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", CacheWarning)      # silence the rebuild notices
    """


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_mtime_ns, st.st_ctime_ns]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(MANIFEST))


def _write_json(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` atomically (a sibling, then ``os.replace``)."""
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_manifest(folder, source: str = "") -> dict:
    """Record every file of ``folder`` (size, SHA-256, stat stamp) in its manifest, written atomically.

    Call it last, once every file is written; :func:`publish_folder` does.

    Parameters
    ----------
    folder : str or os.PathLike
    source : str
        What the folder was built from (shown in warnings).

    Returns
    -------
    dict
        The manifest.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.txt").write_text("hi")
    >>> write_manifest(d, "a test")["files"]["a.txt"]["bytes"], damage(d) is None
    (2, True)
    """
    folder = Path(folder)
    files = {}
    for p in _files(folder):
        digest = _sha256(p)
        st = p.stat()
        files[p.relative_to(folder).as_posix()] = {"bytes": st.st_size, "sha256": digest, "stamp": _stamp(st)}
    manifest = {"format": _FORMAT, "version": _VERSION, "source": str(source), "files": files}
    _write_json(folder / MANIFEST, manifest)
    return manifest


def _read_manifest(folder: Path) -> tuple[dict | None, str | None]:
    try:
        raw = (folder / MANIFEST).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, f"its manifest {MANIFEST} is missing (the folder was never finished, or an older trie-judge wrote it)"
    except (OSError, UnicodeDecodeError) as err:
        return None, f"its manifest {MANIFEST} cannot be read ({getattr(err, 'strerror', None) or err})"
    try:
        man = json.loads(raw)
        ok = (man.get("format") == _FORMAT and man.get("version") == _VERSION and isinstance(man["files"], dict)
              and all(isinstance(r["bytes"], int) and isinstance(r["sha256"], str) for r in man["files"].values()))
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        return None, f"its manifest {MANIFEST} is not one this trie-judge writes (format {_FORMAT!r} v{_VERSION})"
    return man, None


def damage(folder, *, full: bool = False) -> str | None:
    """What is wrong with a cached folder, in a few words, or None when it is whole.

    Checks the manifest is there and readable, and every file it lists is there with its size; hashes
    files up to :data:`ALWAYS_HASH_BYTES`, and larger ones whose stat stamp is not the recorded one
    (or every file with ``full=True``). A file whose stamp changed but whose hash matches (a copied
    cache) has its stamp recorded again, so the next load is cheap.

    Parameters
    ----------
    folder : str or os.PathLike
    full : bool
        Hash every file (0.5-0.7 s per 540 MB).

    Returns
    -------
    str or None

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "w.bin").write_bytes(b"0123456789")
    >>> _ = write_manifest(d)
    >>> _ = (d / "w.bin").write_bytes(b"01234")
    >>> damage(d)
    'w.bin has 5 bytes, 10 expected'
    >>> _ = (d / "w.bin").write_bytes(b"0123456780")
    >>> damage(d)
    'w.bin does not match its checksum'
    >>> (d / "w.bin").unlink()
    >>> damage(d)
    'w.bin is missing'
    """
    folder = Path(folder)
    if not folder.is_dir():
        return "it is not a folder"
    man, why = _read_manifest(folder)
    if man is None:
        return why
    restamp = False
    for rel, rec in man["files"].items():
        path = folder / rel
        try:
            st = path.stat()
        except FileNotFoundError:
            return f"{rel} is missing"
        except OSError as err:
            return f"{rel} cannot be read ({err.strerror or err})"
        if st.st_size != rec["bytes"]:
            return f"{rel} has {st.st_size:,} bytes, {rec['bytes']:,} expected"
        stamp_changed = _stamp(st) != rec.get("stamp")
        if full or stamp_changed or st.st_size <= ALWAYS_HASH_BYTES:
            try:
                digest = _sha256(path)
            except OSError as err:
                return f"{rel} cannot be read ({err.strerror or err})"
            if digest != rec["sha256"]:
                return f"{rel} does not match its checksum"
            if stamp_changed:
                rec["stamp"], restamp = _stamp(st), True
    if restamp:
        try:
            _write_json(folder / MANIFEST, man)
        except OSError:
            pass  # a read-only cache: it is whole, the next load hashes again
    return None


def _manifest_id(folder: Path) -> tuple | None:
    """Which manifest ``folder`` has now (inode, mtime, size), or None: tells a folder published meanwhile."""
    try:
        st = (folder / MANIFEST).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _set_aside(path: Path) -> Path | None:
    """Rename ``path`` (a damaged folder or file) to a hidden sibling; None when there is nothing there."""
    if not (path.exists() or path.is_symlink()):
        return None
    stale = path.with_name(f".stale-{path.name}-{uuid.uuid4().hex[:8]}")
    os.replace(path, stale)
    return stale


def _remove(path: Path | None) -> None:
    if path is None:
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def publish_folder(target, fill, *, source: str = "", replace: bool = False) -> Path:
    """Write a folder atomically: ``fill(tmp)`` writes into a fresh sibling, its manifest is written last, and it
    is renamed to ``target``.

    Readers never see a half-written ``target``; if another process published it first, its copy is
    kept and ours dropped; on any error nothing is left behind. With ``replace=True`` (a damaged
    ``target``), the old one is set aside and removed unless another process has meanwhile put a whole
    one there. Returns ``target``.

    Examples
    --------
    >>> import tempfile
    >>> t = Path(tempfile.mkdtemp()) / "out"
    >>> publish_folder(t, lambda d: (d / "a.txt").write_text("hi")) == t, (t / "a.txt").read_text()
    (True, 'hi')
    >>> sorted(p.name for p in t.iterdir()), damage(t) is None
    (['.judge-manifest.json', 'a.txt'], True)
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".publish-", dir=target.parent))
    seen = _manifest_id(target)
    try:
        fill(tmp)
        write_manifest(tmp, source)
        stale = None
        # the damaged target is set aside, unless another process has meanwhile published a whole one
        if replace and (_manifest_id(target) == seen or damage(target) is not None):
            stale = _set_aside(target)
        try:
            if target.exists():  # a concurrent writer won; keep theirs
                shutil.rmtree(tmp)
            else:
                os.replace(tmp, target)
        except OSError:
            if not target.exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # a concurrent writer won between the check and the rename
        _remove(stale)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def cached(target, source, *, what: str, full: bool = False) -> Path:
    """``target``, checked by :func:`damage`; built when missing, rebuilt with a one-line warning when damaged.

    Parameters
    ----------
    target : str or os.PathLike
        The cached folder.
    source : callable
        ``source() -> (description, fill)``: where the folder is built from, and ``fill(tmp)`` that
        writes its files. Raises ``ModuleNotFoundError`` or ``FileNotFoundError`` when the packaged
        source is not installed.
    what : str
        What the folder holds, for messages (e.g. ``"converted model 'smollm2-135m-instruct'"``).
    full : bool
        Hash every file (after a load from the folder failed).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    CacheError
        ``target`` is damaged and there is no source to rebuild it from.

    Examples
    --------
    >>> import tempfile, warnings
    >>> t = Path(tempfile.mkdtemp()) / "demo"
    >>> src = lambda: ("a string", lambda d: (d / "a.txt").write_text("hi"))
    >>> cached(t, src, what="demo folder") == t
    True
    >>> _ = (t / "a.txt").write_text("")
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     _ = cached(t, src, what="demo folder")
    >>> print(str(seen[0].message).replace(str(t), "T"))
    The cached demo folder at T is damaged (a.txt has 0 bytes, 2 expected); rebuilding it from a string.
    >>> (t / "a.txt").read_text()
    'hi'
    """
    target = Path(target)
    why = None
    if target.exists() or target.is_symlink():
        why = damage(target, full=full)
        if why is None:
            return target
    try:
        description, fill = source()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        if why is None:
            raise  # nothing cached and nothing to build from: the source's own message
        raise CacheError(
            f"The cached {what} at {target} is damaged ({why}) and cannot be rebuilt, because its packaged source "
            f"is missing: {err} Delete the folder (rm -r {shlex.quote(str(target))}) and install the package "
            f"named above; it is rebuilt on the next load.") from err
    if why is not None:
        warnings.warn(f"The cached {what} at {target} is damaged ({why}); rebuilding it from {description}.",
                      CacheWarning, stacklevel=3)
    return publish_folder(target, fill, source=description, replace=why is not None)
