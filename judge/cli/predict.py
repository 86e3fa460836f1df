"""``judge predict``: classify texts from a file or stdin and write one JSON line per text.

Reads texts with `judge.io` (every input error is reported before the model loads), and writes
per text ``{"text", "label", "confidence", "probabilities", "abstained", "abstain_reason"}``
(`judge.Classifier.predict_records`): ``label`` is null where ``--abstain`` abstained, and
``abstain_reason`` says why (the confidence, the threshold and what it certifies). With
``--multi-label`` (or a saved multi-label classifier): ``{"text", "labels", "probabilities"}``,
``labels`` a list, possibly empty (`judge.multilabel.records`).

Three sources of the classifier: new labels (``--labels``, zero-shot), a saved classifier folder
(``--classifier DIR``, from ``judge calibrate``, ``judge fit`` or ``judge evaluate``), or a running
``judge serve --classifier DIR`` (``--server URL``): the persistent mode, which pays the model load
once instead of on every call. Flags that cannot apply to the chosen source are errors naming them.

What it deliberately does not do: calibrate or fit (``judge calibrate`` and ``judge fit`` do and
save the classifier) or batch over a cluster (``judge batch``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from judge.cli._common import (
    add_classifier_args,
    classifier_from_args,
    exit_on_input_error,
    refuse_flags,
)

__all__ = ["add_parser", "run", "post_texts"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``predict`` to the ``judge`` command's subparsers (sets ``func=run``).

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> _ = add_parser(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["predict", "--labels", "a,b", "--top-k", "1"])
    >>> a.labels, a.top_k, a.column, a.func.__name__
    ('a,b', 1, 'text', 'run')
    >>> p.parse_args(["predict", "--labels", "a,b"]).top_k is None          # all labels
    True
    """
    pr = subparsers.add_parser(
        "predict", help="classify texts from a file or stdin; writes JSONL",
        description="Classify texts and write one JSON line per text: text, label (null where --abstain "
                    "abstained), confidence, probabilities (most probable first), abstained, abstain_reason.")
    add_classifier_args(pr, labels_help="the labels, zero-shot: a file (one per line, or a JSON list) or a "
                                        "comma list a,b,c", alias_calibration=True)
    pr.add_argument("--server", metavar="URL", default=None,
                    help="send the texts to a running `judge serve --classifier DIR` (e.g. http://127.0.0.1:8009) "
                         "instead of loading a model here: the persistent mode for repeated calls")
    pr.add_argument("--api-key-env", metavar="VAR", default=None,
                    help="with --server: send `Authorization: Bearer $VAR`")
    pr.add_argument("--input", "-i", default=None, help="input file (lines, .csv or .jsonl); default stdin")
    pr.add_argument("--output", "-o", default=None, help="output JSONL file; default stdout")
    pr.add_argument("--format", choices=["lines", "csv", "jsonl"], default=None,
                    help="input format (default: from the file name: .csv, .jsonl, else one text per line)")
    pr.add_argument("--column", default="text", help="text column (CSV) or field (JSONL) (default text)")
    pr.add_argument("--top-k", type=int, default=None,
                    help="write the k most probable labels' probabilities per text (default: all labels)")
    pr.add_argument("--abstain", action="store_true",
                    help="label null (with the reason) below the calibrated threshold; needs a classifier "
                         "calibrated with --target-accuracy or --coverage")
    pr.add_argument("--multi-label", action="store_true",
                    help="with --labels: judge every label on its own and write each text's list of labels "
                         "(possibly empty) and each label's own probability (a saved classifier says it itself)")
    pr.set_defaults(func=run)
    return pr


def post_texts(url: str, texts, *, abstain=False, top_k=None, api_key=None, timeout=600.0) -> dict:
    """POST ``texts`` to ``URL/v1/classify`` of a running ``judge serve --classifier DIR``; its JSON answer.

    Raises ``SystemExit`` naming the server and the fix when it cannot be reached or answers an error.

    Examples
    --------
    >>> post_texts("http://127.0.0.1:9", ["hi"], timeout=2)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    SystemExit: judge predict: --server 'http://127.0.0.1:9' did not answer (...); start one with `judge serve --classifier DIR`, or check the URL.
    """
    import urllib.error
    import urllib.request

    body = json.dumps({"texts": list(texts), "abstain": bool(abstain), "top_k": top_k}).encode()
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url.rstrip("/") + "/v1/classify", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            detail = json.loads(e.read()).get("detail")
        except (ValueError, AttributeError):
            detail = None
        if isinstance(detail, list):
            detail = "; ".join(d.get("msg", str(d)) for d in detail)
        elif isinstance(detail, dict):
            detail = detail.get("message", detail)
        hint = (" (is it `judge serve --classifier DIR`? A server without --classifier has no /v1/classify)"
                if e.code == 404 else "")
        raise SystemExit(f"judge predict: --server {url!r} answered {e.code}: {detail or e.reason}{hint}.") from None
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)
        raise SystemExit(f"judge predict: --server {url!r} did not answer ({why}); start one with "
                         f"`judge serve --classifier DIR`, or check the URL.") from None


def run(args) -> int:
    """Run ``judge predict`` (see `add_parser`); returns 0, input errors exit naming the fix.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from judge.cli import main
    >>> from judge.testing import tiny_pair
    >>> folder = Path(tempfile.mkdtemp())
    >>> model, tok = tiny_pair(); model.save_pretrained(folder); _ = tok.save_pretrained(folder)
    >>> _ = (folder / "texts.txt").write_text("my card has not arrived")
    >>> main(["predict", "--model", str(folder), "--labels", "card_arrival,exchange_rate",
    ...       "--input", str(folder / "texts.txt"), "--output", str(folder / "out.jsonl")])
    0
    >>> sorted(json.loads((folder / "out.jsonl").read_text()))
    ['abstain_reason', 'abstained', 'confidence', 'label', 'probabilities', 'text']
    """
    import os
    import warnings

    prog = "judge predict"
    if args.top_k is not None and args.top_k < 1:
        raise SystemExit(f"{prog}: --top-k must be at least 1, got {args.top_k}; leave it out to write all labels.")
    if args.server:
        refuse_flags(prog, {"--labels": args.labels, "--classifier": args.classifier, "--model": args.model,
                            "--method": args.method, "--batch-size": args.batch_size},
                     "with --server URL: the server holds the classifier and its model (judge serve --classifier DIR)")
    else:
        refuse_flags(prog, {"--api-key-env": args.api_key_env}, "without --server URL: no server is asked")
    if not args.server and not args.classifier and not args.labels:
        raise SystemExit(f"{prog}: pass --labels FILE|a,b,c (or --classifier DIR of a saved classifier, or "
                         f"--server URL of a running judge serve --classifier DIR).")
    multi = getattr(args, "multi_label", False)
    if multi and (args.server or args.classifier):
        raise SystemExit(f"{prog}: --multi-label applies to new labels (--labels); a saved classifier or a server "
                         f"answers as it was made (save one made with Classifier(labels, multi_label=True)).")
    clf = None if args.server else classifier_from_args(args, prog)
    if multi:
        clf.set_params(multi_label=True)
    if args.input in (None, "-"):
        with exit_on_input_error():
            texts = _read(sys.stdin, args)
    else:
        if not Path(args.input).is_file():
            raise SystemExit(f"{prog}: --input {args.input!r} is not a file; pass a readable file or '-' for stdin.")
        with open(args.input, encoding="utf-8") as fh, exit_on_input_error():
            texts = _read(fh, args)
    if args.server:
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        recs = post_texts(args.server, texts, abstain=args.abstain, top_k=args.top_k, api_key=key)["predictions"]
    else:
        if args.abstain and clf.multi_label:
            raise SystemExit(f"{prog}: --abstain is for one label per text; a multi-label classifier already writes "
                             f"an empty list where no label reaches its threshold. Drop --abstain.")
        if args.abstain and (clf.calibration_ is None or clf.threshold_ is None):
            raise SystemExit(f"{prog}: --abstain needs a classifier calibrated with a threshold: run `judge calibrate "
                             f"DATA --target-accuracy T --out DIR` (or --coverage C) and pass --classifier DIR, or "
                             f"drop --abstain.")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            recs = clf.predict_records(texts, abstain=args.abstain, top_k=args.top_k)
        from judge.cli._common import print_warnings

        print_warnings(prog, caught)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for text, rec in zip(texts, recs):
            out.write(json.dumps({"text": text, **rec}, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def _read(fh, args):
    """The texts of an open input, as ``--format`` and ``--column`` say (`judge.io.read_texts`)."""
    from judge.io import read_texts

    return read_texts(fh, column=args.column, fmt=args.format)
