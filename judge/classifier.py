"""``Classifier``: a causal LM as a zero-shot classifier over K labels (a thin facade).

The constructor stores its arguments and validates them (the label set: empty,
duplicate or look-alike labels fail here, before any model loads); the model is
loaded, the prompt's shared prefix cached and the labels compiled on first use
(:class:`judge.scorers.CompiledLabels`, under a lock: two threads never load
twice). Scoring is done by :class:`judge.engine.Engine`; the fitted state is one
:class:`judge.calibration.state.Calibration`, swapped in one assignment.

Thread safety: ``predict``/``predict_proba``/``decision_function`` may be
called from several threads (model calls are serialised by the engine's
lock); ``calibrate`` may run concurrently with them (readers see the old or
the new calibration, never a mix). Changing a parameter after first use
recompiles on the next call and drops a calibration fitted for the old one
(with a warning).

What it deliberately does not do: fit model weights.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from judge._checks import check_texts, label_indices
from judge._errors import NotCalibratedError
from judge._math import softmax
from judge.automaton.trie import as_label_list, validate_labels
from judge.calibration.state import (
    Calibration,
    check_calibrate_args,
    prior_bias,
    resolve_bias,
)
from judge.prompts import PromptTemplate, label_names_for

__all__ = ["Classifier", "METHODS"]

METHODS = ("auto", "first_token", "exact", "decode")
_PARAMS = ("labels", "model", "tokenizer", "method", "prompt", "label_names", "device", "think",
           "think_tokens", "top_k", "decode_above", "end_token", "rotations")


class Classifier:
    """Zero-shot classification with any causal LM, one of ``labels`` by construction.

    Parameters
    ----------
    labels : sequence of str, length K
        The classes, as the caller names them (``classes_`` keeps this order).
    model : None, str, path or PreTrainedModel
        ``None`` or ``"smollm2-135m-instruct"``: the packaged offline model; a
        hub id or local folder; or a loaded model (then pass ``tokenizer``).
        Loaded lazily on first use.
    tokenizer : PreTrainedTokenizerBase, optional
    method : {"auto", "first_token", "exact", "decode"}
        ``exact``: each label's sequence log-probability. ``first_token``: each
        label's canonical first-token log-probability renormalised over the labels
        (what a constrained decoder commits to first), not the sequence's.
        ``auto``: ``decode`` above ``decode_above`` labels, else ``first_token``
        when every label is a single token (then it equals ``exact``), else
        ``exact`` (chosen on validation: exact beat first-token by 4.2 points where
        labels have several tokens; see the README).
    prompt : PromptTemplate or str, optional
        A string is a completion template with ``{text}`` (and ``{labels}``).
        Default :data:`judge.prompts.DEFAULT_PROMPT`: a completion prompt
        that does not list the labels (chosen on validation; see the README).
    label_names : None, "natural", "raw", dict or list
        What the model writes for each label (default: ``card_arrival`` ->
        ``card arrival``); predictions always map back to ``labels``.
    batch_size : int
        Texts per forward pass.
    device : str, optional
    think : bool
        Let the model write up to ``think_tokens`` tokens of reasoning first,
        then score the labels after an answer cue (every path, calibration's
        content-free inputs included).
    top_k : int
        Distinct labels returned with exact scores by the ``decode`` path (the rest -inf).
    end_token : {"auto", True, False}
        Add the end-of-answer token to the scored sequences: ``"auto"`` only
        for labels whose tokens are a prefix of another label's.
    progress : bool, optional
        Progress bar (default: when there are more than 4 batches).
    batch_invariant : bool
        One text per forward pass: bit-identical scores whatever ``batch_size``
        and whatever else is in the call (slower).
    pack : int
        Texts packed into one row of the forward pass (``batch_size`` texts
        per pass either way). 1 (padding, the default) measured faster on
        CPU: see the README's engine table.
    rotations : int
        Average the label log-probabilities over this many rotations of the
        label list in the prompt (a list started at 0, K/R, 2K/R, ...
        places): it cancels part of the small models' bias towards labels
        listed early, at R times the cost. ``predict`` then scores in full.

    Attributes
    ----------
    classes_ : ndarray of object, shape (K,)
    model_, tokenizer_ : the loaded model and tokenizer (after first use)
    method_ : str
        The scoring path in use; ``engine_.path_`` says whether the tree pass
        or the exact fallback runs it.
    calibration_ : Calibration or None
    bias_, temperature_, threshold_ : fitted by :meth:`calibrate`

    Examples
    --------
    With the packaged SmolLM2-135M-Instruct (offline; loaded on first use):

    >>> clf = Classifier(["card_arrival", "exchange_rate"])
    >>> clf.predict(["Where is my new card?"])
    array(['card_arrival'], dtype=object)
    >>> clf.predict_proba(["Where is my new card?"]).shape
    (1, 2)

    Any causal LM and its tokenizer (here a tiny random one, as the tests use):

    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> Classifier(["positive", "negative"], model, tokenizer=tok).classes_
    array(['positive', 'negative'], dtype=object)
    """

    def __init__(self, labels, model=None, *, tokenizer=None, method="auto", prompt=None,
                 label_names=None, batch_size=8, device=None, think=False, think_tokens=128,
                 top_k=5, decode_above=2000, end_token="auto", progress=None, batch_invariant=False,
                 pack=1, rotations=1):
        object.__setattr__(self, "_lock", threading.RLock())
        object.__setattr__(self, "_compiled", None)
        object.__setattr__(self, "calibration_", None)
        self.labels = as_label_list(labels)
        validate_labels(self.labels)
        if method not in METHODS:
            raise ValueError(f"Unknown method {method!r}; valid methods are {METHODS}.")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        if end_token not in ("auto", True, False):
            raise ValueError(f"end_token must be 'auto', True or False, got {end_token!r}.")
        if prompt is not None and not isinstance(prompt, (str, PromptTemplate)):
            raise TypeError(f"prompt must be a PromptTemplate or a str template, got {type(prompt).__name__}.")
        self.model, self.tokenizer, self.method, self.prompt = model, tokenizer, method, prompt
        self.label_names, self.batch_size, self.device = label_names, batch_size, device
        self.think, self.think_tokens, self.top_k = bool(think), int(think_tokens), int(top_k)
        self.decode_above, self.end_token, self.progress = int(decode_above), end_token, progress
        self.batch_invariant = bool(batch_invariant)
        if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1:
            raise ValueError(f"pack must be a positive int, got {pack!r}.")
        self.pack = pack
        if not isinstance(rotations, int) or isinstance(rotations, bool) or not 1 <= rotations <= 8:
            raise ValueError(f"rotations must be an int in [1, 8], got {rotations!r}; 2 averages the list "
                             f"and its half-way rotation.")
        self.rotations = rotations
        from judge.labels import check_distinguishable

        check_distinguishable(self.labels, label_names_for(self.labels, label_names))  # fail early on look-alikes

    def __setattr__(self, name, value):
        if name in _PARAMS and self.__dict__.get("_compiled") is not None:
            if name == "labels":
                from judge.labels import check_distinguishable

                value = as_label_list(value)
                validate_labels(value)
                check_distinguishable(value)
            with self._lock:
                object.__setattr__(self, "_compiled", None)  # recompiled on next use
                if self.calibration_ is not None and name not in ("tokenizer", "device"):
                    warnings.warn(f"Changing {name!r} after calibrate() drops the calibration fitted for "
                                  f"the old setting; call calibrate() again.", stacklevel=2)
                    object.__setattr__(self, "calibration_", None)
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ setup
    @property
    def classes_(self) -> np.ndarray:
        """The labels in column order of ``predict_proba``: ndarray of object, shape (K,)."""
        return np.array(self.labels, dtype=object)

    def setup(self) -> Classifier:
        """Load the model, cache the prompt prefix and compile the labels now (else on first use).

        Returns
        -------
        self

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["yes", "no"], model, tokenizer=tok).setup().method_    # one token per label
        'first_token'
        """
        self._setup()
        return self

    def _setup(self):
        c = self._compiled
        if c is not None:
            return c
        with self._lock:
            if self._compiled is None:
                object.__setattr__(self, "_compiled", self._compile())
            return self._compiled

    def _compile(self):
        from judge.scorers import compile_labels

        c = compile_labels(self, self.__dict__.get("engine_"))
        object.__setattr__(self, "engine_", c.engine)
        return c

    @property
    def compiled_(self):
        """The compiled label set (:class:`judge.scorers.CompiledLabels`): engine, prompt split, token sequences."""
        return self._setup()

    @property
    def model_(self):
        return self._setup().engine.model_

    @property
    def tokenizer_(self):
        return self._setup().engine.tokenizer_

    @property
    def method_(self) -> str:
        return self._setup().method

    @property
    def automaton_(self):
        """The label :class:`~judge.automaton.trie.TrieAutomaton` (built on first use)."""
        c = self._setup()
        if c.automaton is None:
            from judge.automaton.trie import TrieAutomaton

            c.automaton = TrieAutomaton.build(c.surfaces, c.engine.vocab_)
        return c.automaton

    @property
    def prompt_prefix_(self) -> str:
        """The prompt text before the text (instructions, label list): its keys/values are cached once."""
        return self._setup().prefix

    @property
    def surfaces_(self) -> list[str]:
        """What the model writes for each label right after the prompt (names with the answer's lead)."""
        return list(self._setup().surfaces)

    @property
    def scored_token_ids_(self) -> list[list[int]] | None:
        """The token sequences scored per label (end token appended where the policy says); None on decode."""
        c = self._setup()
        return None if c.label_seqs is None else [list(x) for x in c.label_seqs]

    @property
    def label_token_ids(self) -> list[list[int]]:
        """Canonical token ids of each label as written after the prompt: list of K lists."""
        c = self._setup()
        return c.engine.option_ids(c.tail, c.surfaces, end_token=False)

    def fingerprint(self) -> str:
        """A digest of everything that changes a score: labels as shown, prompt, path, options, model weights.

        Used to key cached scores (``judge evaluate`` resumes only when it matches).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> len(Classifier(["yes", "no"], model, tokenizer=tok).fingerprint())
        64
        """
        from judge.persistence import fingerprint

        return fingerprint(self)

    def render_prompt(self, text: str) -> str:
        """The exact prompt text up to where the answer starts.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> print(Classifier(["yes", "no"], model, tokenizer=tok).render_prompt("Is it?"))
        Classify the text into exactly one of these labels.
        <BLANKLINE>
        Labels:
        (2 labels; not listed)
        <BLANKLINE>
        Text: Is it?
        Label:
        """
        c = self._setup()
        return "".join(t for t, _ in c.pieces(check_texts([text])[0]))

    def prompt_ids(self, text: str) -> list[int]:
        """Token ids of the prompt for ``text`` (tokenized whole, truncated as scoring would)."""
        from judge.scorers import prompt_items

        return list(prompt_items(self._setup(), check_texts([text]))[0].ids)

    # ------------------------------------------------------------ scoring
    def decision_function(self, texts) -> np.ndarray:
        """Raw per-label log-probabilities, before calibration.

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        ndarray of float64, shape (n, K)
            ``first_token``: log P(first token); ``exact``: log P(label);
            ``decode``: exact log P(label + end) of the top ``top_k`` distinct
            labels found by beam search, ``-inf`` for the rest.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["yes", "no"], model, tokenizer=tok).decision_function(["Is water wet?"]).shape
        (1, 2)
        """
        return self._scores(check_texts(texts))

    def content_free_scores(self, inputs=("N/A", "", "[MASK]")) -> np.ndarray:
        """Raw label log-probabilities for content-free inputs (what ``calibrate(bias="contextual")`` uses).

        Unlike :meth:`decision_function`, empty and placeholder strings are accepted: they are
        the point (the model's label prior when the text says nothing).

        Parameters
        ----------
        inputs : sequence of str, length m

        Returns
        -------
        ndarray of float64, shape (m, K)

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["yes", "no"], model, tokenizer=tok).content_free_scores().shape
        (3, 2)
        """
        inputs = [str(x) for x in inputs]
        if not inputs:
            raise ValueError("content_free_scores needs at least one input, e.g. ('N/A', '', '[MASK]'); got none.")
        return self._scores(inputs)

    def _scores(self, texts) -> np.ndarray:
        from judge import scorers

        c = self._setup()
        if not texts:
            return np.zeros((0, len(self.labels)))
        step = 1 if self.batch_invariant else self.batch_size
        show = self.progress if self.progress is not None else len(texts) > 4 * step
        if c.method == "decode":
            extras = scorers.think(c, texts, batch_size=step) if c.think else None
            return scorers.score_decode(c, texts, top_k=self.top_k, batch_size=step, extras=extras)
        pack = 1 if self.batch_invariant else min(self.pack, step)
        out = []
        for ci in [c, *(c.rotated or ())]:  # rotations: the mean log-probability over the list orders
            extras = scorers.think(ci, texts, batch_size=step) if ci.think else None
            out.append(scorers.score_exact(ci, texts, batch_size=max(1, step // pack), progress=show,
                                           extras=extras, pack=pack))
        return out[0] if len(out) == 1 else np.mean(out, axis=0)

    def _bounded(self, texts, cal, mode, eps):
        from judge.scorers import score_bounded_texts

        return score_bounded_texts(self._setup(), texts, cal, mode, eps,
                                   batch_size=1 if self.batch_invariant else self.batch_size)

    def predict_proba(self, texts, *, tolerance: float = 0.0) -> np.ndarray:
        """Probability of each label: ndarray of shape (n, K), rows sum to 1, columns in ``classes_`` order.

        Calibrated (label bias, temperature) once :meth:`calibrate` has run.

        Parameters
        ----------
        texts : sequence of str, length n
        tolerance : float in [0, 1)
            0 (default): full exact scoring. Above 0, on the exact path: the
            label trie is expanded only until the probability mass left
            unexpanded is provably at most ``tolerance`` of what was found, so
            each row is within total-variation distance ``tolerance`` of the
            full exact answer (unexpanded labels get probability 0).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> p = Classifier(["yes", "no"], model, tokenizer=tok).predict_proba(["Is water wet?"])
        >>> p.shape, round(float(p.sum()), 6)
        ((1, 2), 1.0)
        """
        if not (isinstance(tolerance, (int, float)) and 0.0 <= tolerance < 1.0):
            raise ValueError(f"tolerance must be a number in [0, 1), got {tolerance!r}.")
        cal = self.calibration_
        texts = check_texts(texts)
        if tolerance > 0:
            part = self._bounded(texts, cal, "tolerance", float(tolerance))
            if part is not None:
                s = np.where(np.isnan(part), -np.inf, part)
                return cal.transform(s) if cal is not None else softmax(s)
        scores = self._scores(texts)
        return cal.transform(scores) if cal is not None else softmax(scores)

    def predict(self, texts, *, abstain: bool = False) -> np.ndarray:
        """The most probable label of each text (or None below ``threshold_`` with ``abstain=True``).

        On the exact path the answer is exactly the argmax of full exact scoring
        (after label bias and temperature) but only the subtrees of the label
        trie that could still win are expanded (``judge.engine.bounded``). With
        ``abstain=True`` the full distribution is computed (the threshold needs
        the true top probability).

        Returns
        -------
        ndarray of object, shape (n,)

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["yes", "no"], model, tokenizer=tok).predict(["Is water wet?"])[0] in ("yes", "no")
        True
        """
        cal = self.calibration_
        if abstain and (cal is None or cal.threshold is None):
            raise NotCalibratedError(
                "This Classifier has no abstention threshold: call calibrate(texts, y, target_accuracy=...) "
                "or calibrate(texts, y, coverage=...) before predict(abstain=True).")
        texts = check_texts(texts)
        part = None if abstain else self._bounded(texts, cal, "argmax", 0.0)
        if part is not None:  # the exact argmax, proven by the prefix bound, without full scoring
            s = np.where(np.isnan(part), -np.inf, part)
            proba = cal.transform(s) if cal is not None else softmax(s)
        else:
            scores = self._scores(texts)
            proba = cal.transform(scores) if cal is not None else softmax(scores)
        out = self.classes_[np.argmax(proba, axis=1)] if len(proba) else np.empty(0, dtype=object)
        if abstain:
            out[proba.max(axis=1) < cal.threshold] = None
        return out

    # ------------------------------------------------------------ calibration
    def calibrate(self, texts, y, *, bias="auto", temperature=True, target_accuracy=None,
                  coverage=None, confidence=0.95, content_free=("N/A", "", "[MASK]"), scores=None,
                  bias_l2=1.0):
        """Fit label-bias correction, temperature and (optionally) an abstention threshold.

        Everything is validated before any text is scored; on any error the
        fitted state is unchanged.

        Parameters
        ----------
        texts : sequence of str, length n
            Held-out texts (a validation split, never the test set).
        y : sequence of labels, length n
        bias : {"auto", "contextual", "batch", "contextual+fit", "batch+fit", "fit", None}
            ``contextual``: divide out the label distribution the model gives
            content-free inputs (through the same prompt, reasoning included);
            ``batch``: the mean distribution over ``texts``; ``+fit``: then a
            residual bias fitted with the labels jointly with the temperature
            (L2 strength ``bias_l2``; ``fit`` alone starts from no prior);
            ``auto``: :data:`judge.calibration.state.AUTO_BIAS` (chosen on the validation splits, see
            the README), none on the ``decode`` path.
        temperature : bool
        target_accuracy, coverage : float in (0, 1), optional
            Fit ``threshold_`` (Clopper-Pearson lower bound at ``confidence``),
            or keep about this fraction of rows.
        content_free : sequence of str
        scores : ndarray of shape (n, K), optional
            ``decision_function(texts)`` computed already (it is not recomputed).
        bias_l2 : float
            Shrinkage of a fitted residual bias towards the prior (``+fit`` only).

        Returns
        -------
        self

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> texts, y = ["sure", "nope", "yes!", "no way", "ok", "never"], ["yes", "no"] * 3
        >>> clf.calibrate(texts, y, coverage=0.5).is_calibrated
        True
        >>> clf.temperature_ > 0, 0 <= clf.threshold_ <= 1
        (True, True)
        """
        texts = check_texts(texts)
        yi = label_indices(self.labels, y)
        scores = check_calibrate_args(len(texts), yi, len(self.labels), bias=bias, bias_l2=bias_l2,
                                      temperature=temperature, target_accuracy=target_accuracy,
                                      coverage=coverage, confidence=confidence, scores=scores)
        prior, fit_l2, name = resolve_bias(bias, self._setup().method, bias_l2)
        if scores is None:
            scores = self._scores(texts)
        content = self.content_free_scores(content_free) if prior == "contextual" else None
        cal = Calibration.fit(tuple(self.labels), scores, yi, bias=prior_bias(prior, scores, content),
                              bias_method=name, temperature=temperature, target_accuracy=target_accuracy,
                              coverage=coverage, confidence=confidence, fit_bias=fit_l2)
        object.__setattr__(self, "calibration_", cal)
        return self

    @property
    def is_calibrated(self) -> bool:
        """True once :meth:`calibrate` has run."""
        return self.calibration_ is not None

    @property
    def bias_(self):
        return None if self.calibration_ is None else self.calibration_.bias

    @property
    def temperature_(self):
        return None if self.calibration_ is None else self.calibration_.temperature

    @property
    def threshold_(self):
        return None if self.calibration_ is None else self.calibration_.threshold

    @property
    def calibration_report_(self):
        if self.calibration_ is None:
            raise NotCalibratedError("This Classifier is not calibrated: call calibrate(texts, y) first.")
        return self.calibration_.report

    def predict_set(self, texts, *, alpha=0.1, method="lac") -> list[list]:
        """Conformal prediction sets: per text, the labels that cover the truth with probability >= 1 - alpha.

        Returns
        -------
        list of n lists of labels

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> clf = clf.calibrate(["sure", "nope", "yes!", "no way"], ["yes", "no", "yes", "no"])
        >>> [set(s) <= {"yes", "no"} and len(s) >= 1 for s in clf.predict_set(["ok?"], alpha=0.2)]
        [True]
        """
        from judge.calibration import ConformalPredictor

        cal = self.calibration_
        if cal is None:
            raise NotCalibratedError("This Classifier is not calibrated: call calibrate(texts, y) before predict_set().")
        texts = check_texts(texts)
        if not texts:
            return []
        cp = ConformalPredictor(method=method, alpha=alpha, non_empty=True).fit(cal.y, cal.proba)
        member = cp.predict_set(cal.transform(self.decision_function(texts)))
        return [[self.labels[k] for k in np.flatnonzero(row)] for row in member]

    # ------------------------------------------------------------ persistence
    def save(self, directory, *, model_ref=None):
        """Save labels, prompt, options, model reference and calibration (JSON + safetensors).

        The model itself is not saved: its hub id, folder (relative to
        ``directory``) or the packaged alias is; a classifier on an in-memory
        model needs ``model_ref=``. See :mod:`judge.persistence`.

        Examples
        --------
        >>> import tempfile
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> folder = tempfile.mkdtemp()
        >>> _ = clf.save(folder, model_ref="my-org/my-model")     # the model is saved by reference
        >>> Classifier.load(folder, model=model, tokenizer=tok).classes_
        array(['yes', 'no'], dtype=object)
        """
        from judge.persistence import save_classifier

        return save_classifier(self, directory, model_ref=model_ref)

    @classmethod
    def load(cls, directory, *, model=None, tokenizer=None, device=None) -> Classifier:
        """Load a classifier saved by :meth:`save` (validated; no pickle); see judge.persistence."""
        from judge.persistence import load_classifier

        return load_classifier(cls, directory, model=model, tokenizer=tokenizer, device=device)

    def __repr__(self):
        model = self.model if self.model is not None else "smollm2-135m-instruct"
        return f"Classifier(K={len(self.labels)}, model={model!r}, method={self.method!r})"

