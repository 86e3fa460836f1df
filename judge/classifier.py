"""``Classifier``: a causal LM as a zero-shot classifier over K labels.

The constructor only stores its arguments (scikit-learn style); the model is
loaded, the prompt prefix run and the label structures compiled on first use.
Every prediction is one of the labels by construction: scores exist only for
the labels, and decoding is confined to the label automaton.

What it deliberately does not do: fit model weights. ``calibrate`` fits a
handful of numbers (label bias, temperature, threshold) on held-out texts.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from judge._errors import LabelError, NotCalibratedError
from judge.prompts import PromptTemplate, label_names_for
from judge.trie import as_label_list, validate_labels

__all__ = ["Classifier", "METHODS"]

METHODS = ("auto", "first_token", "exact", "decode")
_THINK_CUE = "\n\nFinal answer:\n"
_FORMAT_VERSION = 1


def _softmax(scores: np.ndarray) -> np.ndarray:
    s = np.asarray(scores, np.float64)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


def _check_texts(texts) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"texts must be a list of strings, got a single {type(texts).__name__}; wrap it in a list: "
            f"[{texts[:40]!r}].")
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"texts must be a list of strings, got {type(texts).__name__}.") from None
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(
                f"Text {i} is {type(t).__name__} ({t!r:.40}), not a str; convert or drop it "
                f"(missing values must be removed before classifying).")
        if not t.strip():
            raise ValueError(
                f"Text {i} is empty or only whitespace ({t!r}); there is nothing to classify. "
                f"Remove empty rows first.")
    return texts


class Classifier:
    """Zero-shot classification with any causal LM, one of ``labels`` by construction.

    Parameters
    ----------
    labels : sequence of str, length K
        The classes, as the caller names them (``classes_`` keeps this order).
    model : None, str, path or PreTrainedModel
        ``None`` or ``"smollm2-135m-instruct"``: the packaged offline model;
        a hub id or local folder; or a loaded model (then pass ``tokenizer``).
        Loaded lazily on first use.
    tokenizer : PreTrainedTokenizerBase, optional
    method : {"auto", "first_token", "exact", "decode"}
        ``auto``: ``decode`` above ``decode_above`` labels, else
        ``first_token`` when every label starts with a different token, else
        ``exact``.
    prompt : PromptTemplate or str, optional
        A string is a completion template with ``{text}`` (and ``{labels}``).
    label_names : None, "natural", "raw", dict or list
        What the model writes for each label (default: ``card_arrival`` ->
        ``card arrival``); predictions always map back to ``labels``.
    batch_size : int
        Texts per forward pass.
    device : str, optional
        Default: CUDA when present, else CPU.
    think : bool
        Let the model write up to ``think_tokens`` tokens of reasoning first,
        then score the labels after an answer cue.
    top_k : int
        Labels returned with scores by the ``decode`` path (the rest -inf).
    end_token : {"auto", True, False}
        Add the end-of-answer token to the scored sequences: ``"auto"`` only
        for labels whose tokens are a prefix of another label's.
    progress : bool, optional
        Progress bar (default: when there are more than 4 batches).
    batch_invariant : bool
        Run one text per forward pass, so every score depends on its text
        only: bit-identical whatever ``batch_size`` and whatever else is in
        the call. Costs about 25-35% throughput on CPU (measured on
        Banking77 with SmolLM2). Off: scores agree across batch sizes to
        float32 rounding (~2e-5), since CPU matrix kernels round
        differently for different batch shapes.

    Notes
    -----
    On CPU, first use turns on ``torch.set_flush_denormal(True)`` for the
    process: small models' hidden states drift into denormal floats, which
    made scoring 5-7x slower here; flushing them changes scores by < 1e-30.

    Attributes
    ----------
    classes_ : ndarray of object, shape (K,)
    model_, tokenizer_ : the loaded model and tokenizer (after first use)
    method_ : str
        The scoring path in use.
    bias_, temperature_, threshold_ : fitted by :meth:`calibrate`

    Examples
    --------
    >>> clf = Classifier(["card_arrival", "exchange_rate"])            # doctest: +SKIP
    >>> clf.predict(["Where is my new card?"])                        # doctest: +SKIP
    array(['card_arrival'], dtype=object)
    >>> clf.predict_proba(["Where is my new card?"]).shape            # doctest: +SKIP
    (1, 2)
    """

    def __init__(self, labels, model=None, *, tokenizer=None, method="auto", prompt=None,
                 label_names=None, batch_size=8, device=None, think=False, think_tokens=128,
                 top_k=5, decode_above=2000, end_token="auto", progress=None, batch_invariant=False):
        self.labels = as_label_list(labels)
        validate_labels(self.labels)
        if method not in METHODS:
            raise ValueError(f"Unknown method {method!r}; valid methods are {METHODS}.")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        if end_token not in ("auto", True, False):
            raise ValueError(f"end_token must be 'auto', True or False, got {end_token!r}.")
        self.model = model
        self.tokenizer = tokenizer
        self.method = method
        self.prompt = prompt
        self.label_names = label_names
        self.batch_size = batch_size
        self.device = device
        self.think = bool(think)
        self.think_tokens = int(think_tokens)
        self.top_k = int(top_k)
        self.decode_above = int(decode_above)
        self.end_token = end_token
        self.progress = progress
        self.batch_invariant = bool(batch_invariant)
        self._ready = False
        self.bias_ = self.temperature_ = self.threshold_ = None
        self._calib_proba = self._calib_y = None
        label_names_for(self.labels, label_names)  # fail early on colliding names

    # ------------------------------------------------------------------ setup
    @property
    def classes_(self) -> np.ndarray:
        """The labels in column order of ``predict_proba``: ndarray of object, shape (K,)."""
        return np.array(self.labels, dtype=object)

    def _setup(self):
        if self._ready:
            return
        from judge.models import load_model
        from judge.scoring import PrefixCache, TokenTrie
        from judge.vocab import Vocabulary

        model, tok = load_model(self.model, self.tokenizer, device=self.device)
        self.model_, self.tokenizer_ = model, tok
        if model.device.type == "cpu":
            import torch

            # Hidden states of small models drift into denormal floats, which x86 CPUs process
            # 5-10x slower; flushing them to zero (process-wide) changes scores by < 1e-30.
            torch.set_flush_denormal(True)
        prompt = self.prompt
        if prompt is None:
            prompt = PromptTemplate()
        elif isinstance(prompt, str):
            prompt = PromptTemplate.from_string(prompt)
        elif not isinstance(prompt, PromptTemplate):
            raise TypeError(f"prompt must be a PromptTemplate or a str template, got {type(prompt).__name__}.")
        self.prompt_ = prompt
        self.chat_ = prompt.uses_chat(tok)
        names = label_names_for(self.labels, self.label_names)
        self.names_ = names
        self.surfaces_ = [prompt.label_prefix(tok) + n for n in names]
        prefix_text, suffix_t = prompt.split(tok, names)
        stripped = prefix_text.rstrip(" ")
        self._lead = prefix_text[len(stripped):]  # trailing spaces belong to the text's first token
        self._prefix_text = stripped
        self._tail = suffix_t.split("{text}", 1)[1]
        self.prefix_ids_ = self._encode(stripped, special=not self.chat_)
        self._tail_ids = self._encode(self._tail)
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        base = Vocabulary.from_tokenizer(tok)
        ends = list(base.end_token_ids)
        for e in ([gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])):
            if e not in ends and e < len(tok):
                ends.append(int(e))
        self.vocab_ = Vocabulary.from_tokenizer(tok, end_token_ids=ends)
        K = len(self.labels)
        if self.method == "decode" or (self.method == "auto" and K > self.decode_above):
            # huge label sets: no per-label tokenization; the automaton allows every tokenization
            method = "decode"
            self.label_token_ids_ = None
            self._max_label_tokens = max(len(x.encode()) for x in self.surfaces_) + 1
        else:
            self.label_token_ids_ = self._tokenize_labels()
            firsts = [ids[0] for ids in self.label_token_ids_]
            if self.method == "auto":
                method = "first_token" if len(set(firsts)) == K else "exact"
            else:
                method = self.method
            if method == "first_token" and len(set(firsts)) < K:
                dup = [self.labels[i] for i in range(K) if firsts.count(firsts[i]) > 1][:4]
                raise ValueError(
                    f"method='first_token' needs every label to start with a different token, but {dup} "
                    f"share their first token; use method='exact' (or 'auto').")
            seqs = [list(x) for x in self.label_token_ids_]
            end = self.vocab_.end_token_ids[0]
            if self.end_token is True:
                seqs = [x + [end] for x in seqs]
            elif self.end_token == "auto":
                prefixes = {tuple(x[:j]) for x in seqs for j in range(1, len(x))}
                seqs = [x + [end] if tuple(x) in prefixes else x for x in seqs]
            self.scored_token_ids_ = seqs
            self._trie = TokenTrie.build(seqs)
            self._max_label_tokens = max(len(x) for x in seqs)
            self._first_ids = np.asarray(firsts, np.int64)
        self.method_ = method
        self._prefix = PrefixCache(model, self.prefix_ids_) if method != "decode" else None
        self._automaton = None
        self._ready = True

    def _encode(self, text, special=False):
        return self.tokenizer_(text, add_special_tokens=special)["input_ids"]

    def _tokenize_labels(self) -> list[list[int]]:
        """Canonical tokens of each label as written right after the prompt (one batched call)."""
        ctx = self._tail_ids
        fulls = self.tokenizer_([self._tail + x for x in self.surfaces_], add_special_tokens=False)["input_ids"]
        out = []
        for lab, surface, full in zip(self.labels, self.surfaces_, fulls):
            if full[: len(ctx)] == ctx and len(full) > len(ctx):
                ids = full[len(ctx):]
            else:  # the boundary merged with the prompt's end: tokenize the label alone
                ids = self._encode(surface)
            bad = [i for i in ids if self.vocab_.special[i]]
            if not ids or bad:
                raise LabelError(
                    f"Label {lab!r} cannot be spelled by this tokenizer's vocabulary: it tokenizes to "
                    f"{'nothing' if not ids else 'special or unknown token(s) ' + str(self.tokenizer_.convert_ids_to_tokens(bad))}; "
                    f"give it a name the tokenizer can write (label_names={{...}}).")
            out.append(ids)
        return out

    @property
    def _step(self) -> int:
        return 1 if self.batch_invariant else self.batch_size

    @property
    def automaton_(self):
        """The label :class:`~judge.trie.TrieAutomaton` (built on first use)."""
        self._setup()
        if self._automaton is None:
            from judge.trie import TrieAutomaton

            self._automaton = TrieAutomaton.build(self.surfaces_, self.vocab_)
        return self._automaton

    @property
    def model_max_length(self) -> int | None:
        cfg = getattr(self.model_, "config", None)
        n = getattr(cfg, "max_position_embeddings", None)
        return int(n) if n else None

    # ------------------------------------------------------------ public API
    def render_prompt(self, text: str) -> str:
        """The exact prompt text up to where the answer starts.

        Examples
        --------
        >>> Classifier(["yes", "no"]).render_prompt("Is it?").endswith("assistant\\n")   # doctest: +SKIP
        True
        """
        self._setup()
        return self._prefix_text + self._lead + _check_texts([text])[0] + self._tail

    @property
    def label_token_ids(self) -> list[list[int]]:
        """Canonical token ids of each label as written after the prompt: list of K lists."""
        self._setup()
        if self.label_token_ids_ is None:
            self.label_token_ids_ = self._tokenize_labels()
        return [list(x) for x in self.label_token_ids_]

    def _suffix_ids(self, texts) -> list[list[int]]:
        out = []
        limit = self.model_max_length
        budget = None
        if limit:
            budget = limit - len(self.prefix_ids_) - len(self._tail_ids) - self._max_label_tokens - 1
            if self.think:
                budget -= self.think_tokens + 8
        cut_total, cut_rows = 0, 0
        for t in texts:
            ids = self._encode(self._lead + t)
            if budget is not None and len(ids) > max(budget, 1):
                keep = max(budget, 1)
                cut_total += len(ids) - keep
                cut_rows += 1
                ids = ids[:keep]
            out.append(ids + self._tail_ids)
        if cut_rows:
            warnings.warn(
                f"{cut_rows} text(s) were longer than the model's context ({limit} tokens) allows and "
                f"were truncated, {cut_total} text tokens cut in all; the instructions, label list and "
                f"answer slot were kept whole.", stacklevel=3)
        return out

    def decision_function(self, texts) -> np.ndarray:
        """Raw per-label log-probabilities, before calibration.

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        ndarray of float64, shape (n, K)
            ``first_token``: log P(first token); ``exact``: log P(label);
            ``decode``: sequence log-probabilities of the top ``top_k``
            labels, ``-inf`` for the rest.

        Examples
        --------
        >>> Classifier(["yes", "no"]).decision_function(["Is water wet?"]).shape   # doctest: +SKIP
        (1, 2)
        """
        texts = _check_texts(texts)
        self._setup()
        if not texts:
            return np.zeros((0, len(self.labels)))
        suffixes = self._suffix_ids(texts)
        if self.method_ == "decode":
            return self._decode_scores(suffixes)
        if self.think:
            suffixes = self._think(suffixes)
        return self._score(suffixes)

    def _batches(self, n, desc):
        from tqdm.auto import tqdm

        starts = range(0, n, self._step)
        show = self.progress if self.progress is not None else n > 4 * self._step
        return tqdm(starts, desc=desc, unit="batch", disable=not show)

    def _score(self, suffixes) -> np.ndarray:
        from judge.scoring import label_scores, score_batch

        n = len(suffixes)
        order = sorted(range(n), key=lambda i: -len(suffixes[i]))  # similar lengths share a batch
        out = np.empty((n, len(self.labels)), np.float64)
        for s in self._batches(n, "scoring"):
            idx = order[s:s + self._step]
            batch = [suffixes[i] for i in idx]
            if self.method_ == "first_token":
                lp = score_batch(self.model_, self._prefix, batch, None)
                out[idx] = lp[:, self._first_ids]
            else:
                lp = score_batch(self.model_, self._prefix, batch, self._trie)
                out[idx] = label_scores(lp, self._trie)
        return out

    def _full_prompts(self, suffixes):
        return [list(self.prefix_ids_) + s for s in suffixes]

    def _generate(self, prompts, **kwargs):
        import torch

        from judge.scoring import left_pad

        tok = self.tokenizer_
        pad = tok.pad_token_id if tok.pad_token_id is not None else self.vocab_.end_token_ids[0]
        ids, att = left_pad(prompts, pad, self.model_.device)
        L = ids.shape[1]
        with torch.inference_mode():
            out = self.model_.generate(
                input_ids=ids, attention_mask=att, pad_token_id=pad,
                eos_token_id=list(self.vocab_.end_token_ids), do_sample=False, **kwargs)
        return L, out

    def _think(self, suffixes):
        cue = self._encode(_THINK_CUE)
        out = [None] * len(suffixes)
        ends = set(self.vocab_.end_token_ids)
        for s in self._batches(len(suffixes), "thinking"):
            batch = suffixes[s:s + self._step]
            L, gen = self._generate(self._full_prompts(batch), max_new_tokens=self.think_tokens)
            for j, row in enumerate(gen[:, L:].tolist()):
                reasoning = []
                for t in row:
                    if t in ends:
                        break
                    reasoning.append(t)
                out[s + j] = batch[j] + reasoning + cue
        return out

    def _decode_scores(self, suffixes) -> np.ndarray:
        from judge.processor import TrieLogitsProcessor

        auto = self.automaton_
        K = len(self.labels)
        beams = max(1, min(self.top_k, K))
        out = np.full((len(suffixes), K), -np.inf)
        max_new = max(len(s.encode()) for s in self.surfaces_) + 1
        for s in self._batches(len(suffixes), "decoding"):
            batch = suffixes[s:s + self._step]
            prompts = self._full_prompts(batch)
            L = max(len(p) for p in prompts)
            proc = TrieLogitsProcessor(auto, L)
            if beams > 1:
                _, gen = self._generate(
                    prompts, logits_processor=[proc], num_beams=beams, num_return_sequences=beams,
                    max_new_tokens=max_new, length_penalty=0.0, early_stopping=True,
                    output_scores=True, return_dict_in_generate=True)
                seqs = gen.sequences[:, L:].tolist()
                scores = gen.sequences_scores.float().cpu().numpy()
            else:  # greedy: sum the raw log-probabilities of the chosen tokens up to the end token
                import torch

                _, gen = self._generate(prompts, logits_processor=[proc], max_new_tokens=max_new,
                                        output_logits=True, return_dict_in_generate=True)
                seqs = gen.sequences[:, L:].tolist()
                logp = torch.stack([torch.log_softmax(x.float(), -1) for x in gen.logits], 1)  # (B, T, V)
                ends = set(self.vocab_.end_token_ids)
                scores = []
                for r, seq in enumerate(seqs):
                    total = 0.0
                    for j, t in enumerate(seq):
                        total += float(logp[r, j, t])
                        if t in ends:
                            break
                    scores.append(total)
            for r, (seq, sc) in enumerate(zip(seqs, scores)):
                row = s + r // beams
                state = proc.state(seq[: next((i + 1 for i, t in enumerate(seq)
                                                if t in self.vocab_.end_token_ids), len(seq))])
                if state < 0 or not auto.is_accepting(state):
                    continue
                lab = auto.label_at(state)
                out[row, lab] = np.logaddexp(out[row, lab], float(sc))
        return out

    def predict_proba(self, texts) -> np.ndarray:
        """Probability of each label: ndarray of shape (n, K), rows sum to 1, columns in ``classes_`` order.

        Calibrated (label bias, temperature) once :meth:`calibrate` has run.

        Examples
        --------
        >>> Classifier(["yes", "no"]).predict_proba(["Is water wet?"]).sum()   # doctest: +SKIP
        1.0
        """
        return self._proba_from_scores(self.decision_function(texts))

    def _proba_from_scores(self, scores: np.ndarray) -> np.ndarray:
        s = np.asarray(scores, np.float64)
        if getattr(self, "bias_", None) is not None:
            s = s - self.bias_[None, :]
        T = getattr(self, "temperature_", None)
        if T is not None:
            s = s / T
        return _softmax(s)

    def predict(self, texts, *, abstain: bool = False) -> np.ndarray:
        """The most probable label of each text.

        Parameters
        ----------
        texts : sequence of str, length n
        abstain : bool
            Return ``None`` where the top probability is below ``threshold_``
            (requires :meth:`calibrate` with a target).

        Returns
        -------
        ndarray of object, shape (n,)
            Labels from ``classes_`` (or None where abstaining).

        Examples
        --------
        >>> Classifier(["yes", "no"]).predict(["Is water wet?"])     # doctest: +SKIP
        array(['yes'], dtype=object)
        """
        if abstain and getattr(self, "threshold_", None) is None:
            raise NotCalibratedError(
                "This Classifier has no abstention threshold: call calibrate(texts, y, target_accuracy=...) "
                "or calibrate(texts, y, coverage=...) before predict(abstain=True).")
        proba = self.predict_proba(texts)
        return self._labels_from_proba(proba, abstain)

    def _labels_from_proba(self, proba, abstain=False):
        out = self.classes_[np.argmax(proba, axis=1)] if len(proba) else np.empty(0, dtype=object)
        if abstain:
            out = out.copy()
            out[proba.max(axis=1) < self.threshold_] = None
        return out

    # ------------------------------------------------------------ calibration
    def _label_indices(self, y) -> np.ndarray:
        if isinstance(y, (str, bytes)):
            raise TypeError(f"y must be a sequence of labels, got a single {type(y).__name__}; wrap it in a list.")
        pos = {lab: i for i, lab in enumerate(self.labels)}
        y = list(y)
        bad = sorted({str(v) for v in y if v not in pos})
        if bad:
            raise ValueError(
                f"{len(bad)} value(s) in y are not labels of this classifier, e.g. {bad[:5]}; "
                f"valid labels are classes_ (e.g. {self.labels[:5]}).")
        return np.asarray([pos[v] for v in y], np.int64)

    def calibrate(self, texts, y, *, bias="auto", temperature=True, target_accuracy=None,
                  coverage=None, confidence=0.95, content_free=("N/A", "", "[MASK]")):
        """Fit label-bias correction, temperature and (optionally) an abstention threshold.

        Parameters
        ----------
        texts : sequence of str, length n
            Held-out texts (a validation split, never the test set).
        y : sequence of labels, length n
            Their true labels, values from ``classes_``.
        bias : {"auto", "contextual", "batch", None}
            ``contextual``: divide out the label distribution the model gives
            content-free inputs (``content_free``); ``batch``: divide out the
            mean distribution over ``texts``; ``auto``: contextual, except
            none for the ``decode`` path (whose top-k scores leave most labels
            at -inf).
        temperature : bool
            Fit one temperature by minimizing NLL on ``texts``.
        target_accuracy : float, optional
            Fit ``threshold_``: the lowest confidence whose selected rows reach
            this accuracy with a Clopper-Pearson lower bound at ``confidence``.
        coverage : float, optional
            Fit ``threshold_`` so about this fraction of rows is kept.
        content_free : sequence of str
            Inputs for contextual calibration.

        Returns
        -------
        self

        Examples
        --------
        >>> clf.calibrate(val.texts, val.labels, target_accuracy=0.9)     # doctest: +SKIP
        >>> clf.predict(test.texts, abstain=True)                        # doctest: +SKIP
        """
        texts = _check_texts(texts)
        yi = self._label_indices(y)
        if len(yi) != len(texts):
            raise ValueError(f"texts and y differ in length ({len(texts)} vs {len(yi)}); pass one label per text.")
        if len(texts) < 2:
            raise ValueError(f"calibrate needs at least 2 labelled texts, got {len(texts)}.")
        if bias not in ("auto", "contextual", "batch", None, "none"):
            raise ValueError(f"Unknown bias {bias!r}; valid values are 'auto', 'contextual', 'batch', None.")
        if target_accuracy is not None and coverage is not None:
            raise ValueError("Pass at most one of target_accuracy and coverage.")
        scores = self.decision_function(texts)
        return self._fit_calibration(scores, yi, bias=bias, temperature=temperature,
                                     target_accuracy=target_accuracy, coverage=coverage,
                                     confidence=confidence, content_free=content_free)

    def _fit_calibration(self, scores, yi, *, bias="auto", temperature=True, target_accuracy=None,
                         coverage=None, confidence=0.95, content_free=("N/A", "", "[MASK]")):
        """Fit calibration on already computed ``decision_function`` scores (n, K) and label indices (n,)."""
        from judge.calibration import (
            TemperatureScaler,
            batch_bias,
            contextual_bias,
            expected_calibration_error,
            negative_log_likelihood,
            select_threshold,
        )

        self._setup()
        if bias == "auto":
            bias = None if self.method_ == "decode" else "contextual"
        if bias == "none":
            bias = None
        b = None
        if bias == "contextual":
            cf = self._suffix_ids(list(content_free))
            b = contextual_bias(self._score(cf) if self.method_ != "decode" else self._decode_scores(cf))
        elif bias == "batch":
            b = batch_bias(scores)
        if b is not None:
            finite = np.isfinite(b)
            b = np.where(finite, b, b[finite].mean() if finite.any() else 0.0)
        self.bias_ = b
        self.temperature_ = None
        raw = _softmax(scores)
        shifted = scores - (b[None, :] if b is not None else 0.0)
        if temperature:
            self.temperature_ = float(TemperatureScaler().fit(shifted, yi).temperature_)
        proba = self._proba_from_scores(scores)
        self.threshold_ = None
        if target_accuracy is not None or coverage is not None:
            self.threshold_ = float(select_threshold(yi, proba, target_accuracy=target_accuracy,
                                                     coverage=coverage, confidence=confidence))
        self._calib_proba, self._calib_y = proba, yi
        self.calibration_report_ = {
            "n": int(len(yi)),
            "bias": bias,
            "temperature": self.temperature_,
            "threshold": self.threshold_,
            "accuracy_raw": float((raw.argmax(1) == yi).mean()),
            "accuracy": float((proba.argmax(1) == yi).mean()),
            "ece_raw": float(expected_calibration_error(yi, raw)),
            "ece": float(expected_calibration_error(yi, proba)),
            "nll_raw": float(negative_log_likelihood(yi, raw)),
            "nll": float(negative_log_likelihood(yi, proba)),
        }
        return self

    @property
    def is_calibrated(self) -> bool:
        """True once :meth:`calibrate` has run."""
        return getattr(self, "_calib_y", None) is not None

    def predict_set(self, texts, *, alpha=0.1, method="lac") -> list[list]:
        """Conformal prediction sets: per text, the labels that cover the truth with probability >= 1 - alpha.

        Uses the calibration texts given to :meth:`calibrate` (split conformal,
        finite-sample quantile).

        Parameters
        ----------
        texts : sequence of str, length n
        alpha : float in (0, 1)
        method : {"lac", "aps"}

        Returns
        -------
        list of n lists of labels

        Examples
        --------
        >>> clf.predict_set(["card still not here"], alpha=0.1)     # doctest: +SKIP
        [['card_arrival', 'card_delivery_estimate']]
        """
        from judge.calibration import ConformalPredictor

        if not self.is_calibrated:
            raise NotCalibratedError("This Classifier is not calibrated: call calibrate(texts, y) before predict_set().")
        cp = ConformalPredictor(method=method, alpha=alpha, non_empty=True).fit(self._calib_y, self._calib_proba)
        member = cp.predict_set(self.predict_proba(texts))
        return [[self.labels[k] for k in np.flatnonzero(row)] for row in member]

    # ------------------------------------------------------------ persistence
    def save(self, directory) -> Path:
        """Save labels, prompt, method, model reference and fitted calibration (JSON + safetensors).

        The model itself is not saved: a hub id, folder or the packaged alias
        is recorded and loaded again by :meth:`load`.

        Returns
        -------
        pathlib.Path
            The directory.

        Examples
        --------
        >>> clf.save("my_classifier")                  # doctest: +SKIP
        >>> Classifier.load("my_classifier").predict(["hi"])   # doctest: +SKIP
        """
        from dataclasses import asdict

        from safetensors.numpy import save_file

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        model_ref = self.model
        if model_ref is not None and not isinstance(model_ref, (str, Path)):
            model_ref = getattr(getattr(model_ref, "config", None), "name_or_path", None) or None
            warnings.warn(
                f"The classifier holds a model object; its reference {model_ref!r} is saved instead, "
                f"so pass model=... to Classifier.load if it cannot be loaded from there.", stacklevel=2)
        prompt = self.prompt
        if isinstance(prompt, PromptTemplate):
            prompt = {"template": asdict(prompt)}
        label_names = self.label_names
        if isinstance(label_names, dict):
            label_names = {"mapping": label_names}
        config = {
            "format": "trie-judge-classifier", "version": _FORMAT_VERSION,
            "labels": self.labels, "model": None if model_ref is None else str(model_ref),
            "method": self.method, "prompt": prompt, "label_names": label_names,
            "batch_size": self.batch_size, "batch_invariant": self.batch_invariant,
            "think": self.think, "think_tokens": self.think_tokens,
            "top_k": self.top_k, "decode_above": self.decode_above, "end_token": self.end_token,
            "calibration": None,
        }
        if self.is_calibrated:
            config["calibration"] = {
                "temperature": self.temperature_, "threshold": self.threshold_,
                "report": self.calibration_report_,
            }
            arrays = {"calib_proba": np.ascontiguousarray(self._calib_proba, np.float64),
                      "calib_y": np.ascontiguousarray(self._calib_y, np.int64)}
            if self.bias_ is not None:
                arrays["bias"] = np.ascontiguousarray(self.bias_, np.float64)
            save_file(arrays, str(d / "calibration.safetensors"))
        tmp = d / "classifier.json.tmp"
        tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False))
        tmp.replace(d / "classifier.json")
        return d

    @classmethod
    def load(cls, directory, *, model=None, tokenizer=None, device=None) -> Classifier:
        """Load a classifier saved by :meth:`save` (no pickle: JSON and safetensors only).

        Parameters
        ----------
        directory : str or Path
        model, tokenizer : optional
            Override the saved model reference (e.g. an already loaded model).

        Examples
        --------
        >>> Classifier.load("my_classifier")           # doctest: +SKIP
        """
        from safetensors.numpy import load_file

        d = Path(directory)
        path = d / "classifier.json"
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist; pass the directory given to Classifier.save().")
        try:
            cfg = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON ({err}); was it written by Classifier.save()?") from None
        if cfg.get("format") != "trie-judge-classifier" or cfg.get("version") != _FORMAT_VERSION:
            raise ValueError(
                f"{path} is not a trie-judge classifier of format version {_FORMAT_VERSION} "
                f"(format={cfg.get('format')!r}, version={cfg.get('version')!r}).")
        prompt = cfg["prompt"]
        if isinstance(prompt, dict):
            prompt = PromptTemplate(**prompt["template"])
        label_names = cfg["label_names"]
        if isinstance(label_names, dict):
            label_names = label_names["mapping"]
        clf = cls(cfg["labels"], model if model is not None else cfg["model"], tokenizer=tokenizer,
                  method=cfg["method"], prompt=prompt, label_names=label_names,
                  batch_size=cfg["batch_size"], device=device, think=cfg["think"],
                  think_tokens=cfg["think_tokens"], top_k=cfg["top_k"], decode_above=cfg["decode_above"],
                  end_token=cfg["end_token"], batch_invariant=cfg.get("batch_invariant", False))
        cal = cfg.get("calibration")
        if cal:
            arrays = load_file(str(d / "calibration.safetensors"))
            clf.bias_ = arrays.get("bias")
            clf.temperature_ = cal["temperature"]
            clf.threshold_ = cal["threshold"]
            clf.calibration_report_ = cal["report"]
            clf._calib_proba, clf._calib_y = arrays["calib_proba"], arrays["calib_y"]
        return clf

    def __repr__(self):
        model = self.model if self.model is not None else "smollm2-135m-instruct"
        return f"Classifier(K={len(self.labels)}, model={model!r}, method={self.method!r})"
