"""``judge serve`` and ``judge calibrate-decisions``: the decisions HTTP API and its calibration profile.

``judge serve`` builds a `judge.decisions.Decider` and serves
`judge.server.app.create_app` with uvicorn (``/v1/systemone``,
``/v1/decisions``, ``/v1/models``; with ``--classifier DIR`` also ``/v1/classify``, what
``judge predict --server URL`` asks, so repeated calls pay the model load once); ``judge calibrate-decisions`` fits a
profile with `judge.decisions.calibrate_decisions` from labelled JSONL (read by
`judge.server.wire.read_labelled`), and ``judge fit-decisions`` a fitted profile (`judge.decisions.fit_profile`).
FastAPI and uvicorn are imported only when ``serve`` runs (the ``[serve]`` extra).

What it deliberately does not do: define routes or wire models (`judge.server`
does), or score anything itself (`judge.decisions` does).
"""

from __future__ import annotations

import argparse
import os
import sys

from judge.engine.passes import DEFAULT_MAX_BATCH_TOKENS

__all__ = ["add_parsers", "run_serve", "run_calibrate_decisions", "run_fit_decisions"]


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="hub id, local folder, or the packaged default (smollm2-135m-instruct)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (default 127.0.0.1); any other than loopback (127.0.0.0/8, ::1, "
                        "localhost) needs --api-key-env, or --allow-unauthenticated")
    p.add_argument("--port", type=int, default=8009, help="port (default 8009)")
    p.add_argument("--api-key-env", metavar="VAR", default=None,
                   help="require `Authorization: Bearer $VAR` (unset: any key is accepted, on loopback only unless "
                        "--allow-unauthenticated)")
    p.add_argument("--allow-unauthenticated", action="store_true",
                   help="serve a --host other than loopback without --api-key-env: anyone who can reach the port "
                        "may use the model (behind a proxy or firewall that does the authentication)")
    p.add_argument("--calibration", metavar="PROFILE", default=None,
                   help="decision calibration profile from `judge calibrate-decisions`")
    p.add_argument("--classifier", metavar="DIR", default=None,
                   help="also serve this saved classifier (from judge calibrate, judge fit or Classifier.save) on "
                        "POST /v1/classify, for `judge predict --server URL`; its model serves the decisions too "
                        "(unless --model names another)")
    p.add_argument("--profile", metavar="PROFILE", default=None,
                   help="fitted decision profile from `judge fit-decisions`: the questions it has heads for are "
                        "answered by them")
    p.add_argument("--device", default=None, help="torch device (default: CUDA when present, else CPU)")
    p.add_argument("--backend", choices=("transformers", "vllm"), default="transformers",
                   help="who scores: the transformers engine (default) or vLLM (its own environment: "
                        "scripts/setup_vllm.sh; --model a hub id or folder)")
    p.add_argument("--served-name", default=None, help="model name in responses (default trie-judge/<model>)")
    p.add_argument("--max-wait-ms", type=float, default=5.0,
                   help="micro-batching wait while another request is being admitted (default 5 ms)")
    p.add_argument("--max-batch-questions", type=int, default=256, help="questions per forward pass (default 256)")
    p.add_argument("--max-queue", type=int, default=64, help="waiting requests before 429 (default 64)")
    p.add_argument("--max-body-bytes", type=int, default=2 * 1024 * 1024,
                   help="largest request body, compressed or not, and decoded (default 2 MiB)")
    p.add_argument("--max-questions", type=int, default=1024, help="questions per request (default 1024)")
    p.add_argument("--max-options", type=int, default=10_000,
                   help="options per choice question, at least 255 (default 10000)")
    p.add_argument("--max-request-tokens", type=int, default=65536, help="tokens per request (default 65536)")
    p.add_argument("--max-state-tokens", type=int, default=32768,
                   help="tokens of the state plus the longest question (default 32768)")
    p.add_argument("--max-batch-tokens", type=int, default=DEFAULT_MAX_BATCH_TOKENS,
                   help=f"tokens per scoring call and per forward pass: bounds memory (default {DEFAULT_MAX_BATCH_TOKENS})")
    p.add_argument("--torch-threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's, one per core); 1 is faster on a shared, "
                        "oversubscribed machine")
    p.add_argument("--drain-seconds", type=float, default=300,
                   help="on SIGTERM/SIGINT, how long the requests in flight may take to start being scored; the "
                        "ones still waiting then are refused with 503 (default 300)")
    p.add_argument("--guard", action="store_true",
                   help="guard every request that does not send \"x_guard\": false: content scanners, and the "
                        "state's flagged pieces erased in the same scoring call (judge.decisions.guard; more "
                        "tokens per request, priced by admission)")
    p.add_argument("--log-level", default="info", help="uvicorn's log level (default info)")


def _calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="labelled decisions, JSONL (see judge.server.wire.read_labelled)")
    p.add_argument("--out", required=True, metavar="PROFILE", help="where to write the profile (JSON)")
    p.add_argument("--model", default=None, help="hub id, local folder or packaged alias (default: smollm2-135m-instruct)")
    p.add_argument("--device", default=None, help="torch device (default: CUDA when present, else CPU)")
    p.add_argument("--no-bias", action="store_true", help="fit temperatures only")


def _fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="labelled decisions, JSONL, the shape `judge calibrate-decisions` reads")
    p.add_argument("--out", required=True, metavar="PROFILE", help="where to write the profile (JSON)")
    p.add_argument("--model", default=None, help="model name or folder (default: the packaged SmolLM2-135M-Instruct)")
    p.add_argument("--device", default=None, help="torch device (default: CUDA when present, else CPU)")
    p.add_argument("--cv", type=int, default=5, help="cross-validation folds for the L2 strength (default 5)")
    p.add_argument("--features", default="auto", choices=("auto", "hidden"),
                   help="the head's features: 'auto' (the default, chosen on validation): the answer-slot state "
                        "and the state's sentence embedding and TF-IDF, each kept per question where "
                        "cross-validation says it helps; 'hidden': the answer-slot state alone")


def add_parsers(subparsers) -> None:
    """Add ``serve``, ``calibrate-decisions`` and ``fit-decisions`` to the ``judge`` command's subparsers.

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> add_parsers(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["serve", "--port", "9000", "--api-key-env", "K"])
    >>> a.port, a.host, a.api_key_env, a.func.__name__
    (9000, '127.0.0.1', 'K', 'run_serve')
    >>> p.parse_args(["calibrate-decisions", "f.jsonl", "--out", "p.json"]).func.__name__
    'run_calibrate_decisions'
    """
    s = subparsers.add_parser("serve", help="serve /v1/systemone, /v1/decisions and /v1/models over HTTP")
    _serve_args(s)
    s.set_defaults(func=run_serve)
    c = subparsers.add_parser("calibrate-decisions", help="fit a decision calibration profile from labelled JSONL")
    _calibrate_args(c)
    c.set_defaults(func=run_calibrate_decisions)
    f = subparsers.add_parser("fit-decisions", help="fit a decision profile (a head per question) from labelled JSONL")
    _fit_args(f)
    f.set_defaults(func=run_fit_decisions)


def run_serve(args: argparse.Namespace) -> int:
    """Start the server (blocks until SIGINT/SIGTERM; in-flight requests are answered, or refused with 503 past
    ``--drain-seconds``); 2 on a setup error, or a ``--host`` beyond loopback with neither ``--api-key-env`` nor
    ``--allow-unauthenticated`` (refused before anything loads).

    Examples
    --------
    Not run as a doctest (+SKIP): it serves until stopped (tests/server/test_app.py starts and stops one).

    >>> from judge.cli import main
    >>> main(["serve", "--port", "8009"])  # doctest: +SKIP
    0
    """
    refusal = _exposure_refusal(args)
    if refusal:  # before anything loads or binds
        print(refusal, file=sys.stderr)
        return 2
    try:
        from judge.server.app import ServerConfig, create_app
        from judge.server.shutdown import serve
    except ImportError as e:
        print(f"judge serve needs the [serve] extra ({e}); run `pip install 'trie-judge[serve]'`.", file=sys.stderr)
        return 2
    from judge.decisions import Decider

    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            print(f"--api-key-env {args.api_key_env}: that environment variable is unset or empty; export it "
                  f"or drop the option to accept any key.", file=sys.stderr)
            return 2
    from judge.engine import Engine

    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    if getattr(args, "backend", "transformers") == "vllm" and getattr(args, "profile", None):
        print("judge serve: --profile reads the model's hidden states, which the vLLM backend does not expose; "
              "use --backend transformers with --profile.", file=sys.stderr)
        return 2
    clf, name = None, None
    if getattr(args, "classifier", None):
        clf, name = _load_classifier(args)
        if clf is None:
            return 2
    if getattr(args, "backend", "transformers") == "vllm":  # the same scoring calls, answered by vLLM
        from judge.backends.vllm import VLLMScorer

        if clf is not None:
            print("judge serve: --classifier runs on the transformers engine; drop --backend vllm or --classifier.",
                  file=sys.stderr)
            return 2
        engine = VLLMScorer(args.model)
    elif clf is not None:  # one copy of the model: the classifier's, already loaded
        engine = Engine(clf.model_, clf.tokenizer_, device=args.device, max_batch_tokens=args.max_batch_tokens)
    else:
        engine = Engine(args.model, device=args.device, max_batch_tokens=args.max_batch_tokens)
    model_name = args.model if clf is None else (args.model or clf.model or "smollm2-135m-instruct")
    embedder = "auto"  # beside another model: the LM alone (judge.decisions.fusion.choice_fusion)
    if (args.model if clf is None else clf.model) is None:  # the packaged model, handed over as a scorer: say so
        from judge.encoders import EMBED_EXTRA, embedder_installed

        embedder = "minilm" if embedder_installed() else None
        if embedder is None:
            print(f"judge serve: choice questions are answered by the LM alone: the sentence embedder fused beside "
                  f"the packaged model is not installed; {EMBED_EXTRA}.", file=sys.stderr)
    decider = Decider(model_name, device=args.device, calibration=args.calibration, scorer=engine,
                      profile=getattr(args, "profile", None), embedder=embedder)
    try:
        _ = decider.calibration_, decider.profile_  # fail now, not on the first request
    except (OSError, ValueError) as e:
        print(f"judge serve: {e}", file=sys.stderr)
        return 2
    try:
        config = ServerConfig(api_key=key, served_name=args.served_name, max_wait_ms=args.max_wait_ms,
                              max_batch_questions=args.max_batch_questions, max_queue=args.max_queue,
                              max_body_bytes=args.max_body_bytes, max_questions=args.max_questions,
                              max_options=args.max_options, max_request_tokens=args.max_request_tokens,
                              max_state_tokens=args.max_state_tokens, max_batch_tokens=args.max_batch_tokens,
                              guard=getattr(args, "guard", False))
    except ValueError as e:
        print(f"judge serve: {e}", file=sys.stderr)
        return 2
    app = create_app(decider, config, classifier=clf, classifier_name=name or "classifier")
    started = serve(app, host=args.host, port=args.port, log_level=args.log_level, drain_s=args.drain_seconds)
    return 0 if started else 2


def _is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine: ``localhost``, or an address in 127.0.0.0/8 or ::1.

    Examples
    --------
    >>> [_is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST.")]
    [True, True, True, True, True, True]
    >>> [_is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.2", "example.org", "localhost.example.org")]
    [False, False, False, False, False, False]
    """
    import ipaddress

    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:  # another host name: it may resolve to any interface
        return False
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def _exposure_refusal(args: argparse.Namespace) -> str | None:
    """The message refusing to serve ``--host`` beyond loopback with no key, or None when serving is allowed.

    Examples
    --------
    >>> ok = argparse.Namespace(host="0.0.0.0", api_key_env=None, allow_unauthenticated=True)
    >>> _exposure_refusal(ok) is None, _exposure_refusal(argparse.Namespace(host="127.0.0.1", api_key_env=None))
    (True, None)
    >>> print(_exposure_refusal(argparse.Namespace(host="0.0.0.0", api_key_env=None)))  # doctest: +ELLIPSIS
    judge serve --host '0.0.0.0': ... pass --api-key-env VAR ..., or --allow-unauthenticated ...
    """
    if _is_loopback(args.host) or args.api_key_env or getattr(args, "allow_unauthenticated", False):
        return None
    return (f"judge serve --host {args.host!r}: that is not a loopback address (127.0.0.0/8, ::1, localhost), so "
            f"anyone who can reach port {getattr(args, 'port', 8009)} could use the model, and no key is required; "
            f"pass --api-key-env VAR (clients then send `Authorization: Bearer $VAR`), or --allow-unauthenticated "
            f"if something in front of the server authenticates, or serve on --host 127.0.0.1.")


def _load_classifier(args):
    """(the saved classifier of ``--classifier``, set up now; its folder's name), or (None, None) after a message."""
    from pathlib import Path

    from judge.classifier import Classifier

    folder = Path(args.classifier)
    if not (folder / "classifier.json").is_file():
        print(f"judge serve: --classifier {args.classifier!r} has no classifier.json; pass a folder written by judge "
              f"calibrate, judge fit, judge evaluate (OUT/classifier) or Classifier.save().", file=sys.stderr)
        return None, None
    try:
        clf = Classifier.load(folder, model=args.model, device=args.device).setup()  # load the model now
    except (ValueError, OSError) as e:
        print(f"judge serve: --classifier {args.classifier!r}: {e}", file=sys.stderr)
        return None, None
    return clf, folder.resolve().name


def _labelled_reader(command: str):
    """`judge.server.wire.read_labelled`, or None after saying which extra it needs (the wire parser is pydantic's)."""
    try:
        from judge.server.wire import read_labelled
    except ModuleNotFoundError as e:
        print(f"judge {command}: reading labelled questions needs {e.name!r}, which the wire contract's parser uses; "
              f"install it with pip install 'trie-judge[serve]'.", file=sys.stderr)
        return None
    return read_labelled


def run_calibrate_decisions(args: argparse.Namespace) -> int:
    """Fit and write a decision calibration profile; prints a summary; returns 0.

    Examples
    --------
    Four labelled yes/no lines on the packaged model (a few seconds, most of it loading the model):

    >>> import json, os, tempfile
    >>> from judge.cli import main
    >>> d = tempfile.mkdtemp()
    >>> q = {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}}
    >>> rows = [("I want my money back for this order.", True), ("Thanks, everything arrived fine.", False),
    ...         ("Please refund the double charge.", True), ("What are your opening hours?", False)]
    >>> with open(os.path.join(d, "labelled.jsonl"), "w") as fh:
    ...     for state, label in rows:
    ...         _ = fh.write(json.dumps({"state": state, "questions": q, "labels": {"refund": label}}) + "\\n")
    >>> main(["calibrate-decisions", os.path.join(d, "labelled.jsonl"),
    ...       "--out", os.path.join(d, "profile.json")])  # doctest: +ELLIPSIS
    wrote ...profile.json: temperature noul=...; noul bias ...; n {'noul': 4}
    0
    """
    from judge.decisions import Decider, calibrate_decisions

    read_labelled = _labelled_reader("calibrate-decisions")
    if read_labelled is None:
        return 2
    cal = calibrate_decisions(read_labelled(args.file), Decider(args.model, device=args.device), bias=not args.no_bias)
    path = cal.save(args.out)
    temps = ", ".join(f"{k}={v:.3f}" for k, v in sorted(cal.temperature.items()))
    print(f"wrote {path}: temperature {temps}; noul bias {cal.noul_bias:+.3f}; n {cal.meta.get('n')}")
    return 0


def run_fit_decisions(args: argparse.Namespace) -> int:
    """Fit and write a decision profile (`judge.decisions.fit_profile`); prints one line per question; 0, or 2 on a bad file.

    Examples
    --------
    Six labelled yes/no lines on a tiny model saved to a folder:

    >>> import json, tempfile, pathlib
    >>> from judge.cli import main
    >>> from judge.testing import tiny_pair
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> model, tok = tiny_pair(); model.save_pretrained(d / "m"); _ = tok.save_pretrained(d / "m")
    >>> lines = [{"state": f"ticket {i}", "question": {"type": "noul", "instructions": "Refund?"}, "label": i % 2 == 0}
    ...          for i in range(6)]
    >>> _ = (d / "l.jsonl").write_text("\\n".join(json.dumps(x) for x in lines))
    >>> main(["fit-decisions", str(d / "l.jsonl"), "--out", str(d / "p.json"), "--model", str(d / "m"), "--cv", "2"])
    ... # doctest: +ELLIPSIS
    noul 'Refund?': 6 labelled states, classes ['true', 'false'] ...
    0
    """
    from judge.decisions import Decider, DecisionError, fit_profile
    from judge.io import InputError

    read_labelled = _labelled_reader("fit-decisions")
    if read_labelled is None:
        return 2
    decider = Decider(args.model, device=args.device)
    try:
        prof = fit_profile(read_labelled(args.file), decider, cv=args.cv, features=args.features)
    except (DecisionError, InputError) as e:
        print(f"judge fit-decisions: {e}", file=sys.stderr)
        return 2
    prof.save(args.out)
    for q in prof.questions.values():
        print(f"{q['type']} {q['instructions']!r}: {q['n']} labelled states, classes {q['classes']} (counts "
              f"{q['counts']}), L2 {q['l2']:.3g}, features {q.get('features', 'hidden+scores')}")
    print(f"wrote {args.out}")
    return 0
