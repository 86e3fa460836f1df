"""``Classifier``: a causal LM as a zero-shot classifier over K labels (a thin facade).

The constructor stores its arguments and validates them (the label set: empty,
duplicate or look-alike labels fail here, before any model loads); the model is
loaded, the prompt's shared prefix cached and the labels compiled on first use
(:class:`judge.compiled.CompiledLabels`, under a lock: two threads never load
twice). Scoring is done by :class:`judge.engine.Engine`; the fitted state is one
:class:`judge.calibration.state.Calibration`, swapped in one assignment.

Thread safety: ``predict``/``predict_proba``/``decision_function`` may be
called from several threads (model calls are serialised by the engine's
lock); ``calibrate`` may run concurrently with them (readers see the old or
the new calibration, never a mix). Changing a parameter after first use
recompiles on the next call and drops a calibration fitted for the old one
(with a warning).

What it deliberately does not do: fit anything itself (``fit`` delegates to
:mod:`judge.adaptation`, ``calibrate`` to :mod:`judge.calibration`).
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from judge import multilabel
from judge._checks import check_texts
from judge._errors import NotCalibratedError
from judge._math import softmax
from judge.calibrated import (
    CalibratedMixin,
    call_calibration,
    check_content_free,
    note_threshold,
    offset_scores,
    warn_if_collapsed,
)
from judge.calibration.bias import CONTENT_FREE
from judge.engine.protocol import Closing
from judge.fusion import is_fused
from judge.inspection import InspectionMixin
from judge.labels import as_label_list, label_descriptions, label_names_for
from judge.labels import warn_if_descriptions_unscored as _warn_descriptions
from judge.parameters import METHODS, PARAM_NAMES, Parameters, names_with
from judge.transductive import TransductiveMixin, transductive_for, transductive_scores

__all__ = ["Classifier", "METHODS"]

class Classifier(ClassifierMixin, Parameters, InspectionMixin, BaseEstimator, Closing, CalibratedMixin,
                 TransductiveMixin):
    """Zero-shot classification with any causal LM, one of ``labels`` by construction.

    Parameters
    ----------
    labels : sequence of str, length K >= 2, or mapping {label: description}
        The classes, as the caller names them (``classes_`` keeps this order). A mapping also says
        what each label means (None: nothing): the model then scores what ``describe`` says.
        One label is an error (every text would get it): ask ``[label, "other"]`` or a yes/no question.
    model : None, str, path or PreTrainedModel
        ``None`` or ``"smollm2-135m-instruct"``: the packaged offline model; a
        hub id or local folder; or a loaded model (then pass ``tokenizer``).
        Loaded lazily on first use.
    tokenizer : PreTrainedTokenizerBase, optional
    method : {"auto", "first_token", "exact", "decode"}
        ``exact``: each label's sequence log-probability. ``first_token``: each
        label's canonical first-token log-probability renormalised over the labels
        (what a constrained decoder commits to first), not the sequence's.
        ``search``: for huge label sets, the certified best-first search
        (``predict``: the proven argmax; ``predict_proba``/``decision_function``:
        every label within ``search_tolerance`` of the mass, the rest -inf).
        ``decode``: beam search through the automaton (it can miss the argmax).
        ``auto``: ``search`` above ``decode_above`` labels, else ``first_token``
        when every label is a single token (then it equals ``exact``), else
        ``exact`` (chosen on validation: exact beat first-token by 4.2 points where
        labels have several tokens; :doc:`/benchmarks/accuracy`).
    prompt : PromptTemplate or str, optional
        A string is a completion template with ``{text}`` (and ``{labels}``).
        Default :data:`judge.prompts.DEFAULT_PROMPT`: a completion prompt
        that does not list the labels (chosen on validation; :doc:`/benchmarks/accuracy`).
    label_names : None, "natural", "raw", dict or list
        What the model writes for each label (default: ``card_arrival`` ->
        ``card arrival``); predictions always map back to ``labels``.
    describe : {"auto", "name", "description", "both"}
        What the model writes for a described label: its name, its description, or
        ``name: description``. ``auto`` is :data:`judge.labels.AUTO_DESCRIBE`, ``"name"``: chosen on
        the four validation splits (mean accuracy 44.9% names, 43.4% descriptions, 38.3% both), with
        a warning, so that descriptions are never dropped silently.
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
        Progress bar (default: when there are more than 4 batches, shown once scoring has taken 2 s).
    batch_invariant : bool
        One text per forward pass: bit-identical scores whatever ``batch_size``
        and whatever else is in the call (slower).
    pack : int
        Texts packed into one row of the forward pass; 1 (padding, default) measured faster on CPU.
    rotations : int
        Average the label log-probabilities over this many rotations of the label list in the prompt:
        it cancels part of small models' bias toward labels listed early, at R times the cost.
    search_budget : int or None
        Most tokens fed per text by the certified search (``predict``, tolerance
        scoring); past it the best label found is returned, flagged in
        ``search_report_`` and with a warning. None: no limit.
    search_tolerance : float in (0, 1)
        Total-variation tolerance of ``predict_proba`` and ``decision_function``
        on the ``search`` path.
    shortlist : int, optional
        Keep only the M labels nearest to each text by embedding similarity
        (:mod:`judge.retrieval`) and score those exactly; the others get
        probability 0. Check :meth:`shortlist_recall` on validation data.
    shortlist_encoder : None, str, callable, list or dict
        How texts and labels are embedded for the shortlist: character n-gram TF-IDF (None, the
        default, chosen on ICD-10-CM validation), ``"minilm"``, ``"model"`` (the LM's mean-pooled
        states), any encoder of :mod:`judge.encoders`, a list of them (similarities averaged) or a
        mapping of them to weights (``{"tfidf": 0.25, "minilm": 0.75}`` ranked best on ICD-10-CM
        validation, at about 20 CPU minutes to embed 74,719 titles once):
        :meth:`judge.compiled.CompiledLabels.shortlist`, :doc:`/benchmarks/huge_k`. Saved with the classifier when it is made of names.
    prior : {"auto", "contextual", "batch", None}
        The label-free correction applied before :meth:`calibrate` or :meth:`fit` (which replace it):
        the model's preference for some labels whatever the text, divided out without labels
        (:meth:`prior_for`, :mod:`judge.calibrated`; ``auto``: chosen on validation).
        :meth:`decision_function` stays raw.
    embedder : "auto", None, str or encoder
        A sentence embedder beside the language model: the labels' exact scores are fused with the
        text-label similarity (:mod:`judge.fusion`; ``fusion_`` holds the weights, refitted by
        :meth:`calibrate`). ``"auto"`` (default): the packaged all-MiniLM-L6-v2 beside the packaged LM
        (14-20 points above the LM alone zero-shot, :doc:`/baselines`); beside any other model at weight 0 (the
        LM alone) until :meth:`calibrate` fits the weight; none on the paths that score some labels
        only, nor without the ``embed`` extra (with a notice): :func:`judge.fusion.initial_fusion`.
        None: the LM alone; a name (``"minilm"``) or encoder: fused on any model.
    backend : {"transformers", "vllm"}
        Who scores: the transformers :class:`~judge.engine.Engine`, or vLLM
        (:class:`judge.backends.vllm.VLLMScorer`, its own environment: ``scripts/setup_vllm.sh``;
        the same token sequences, equal to float32 rounding; no ``think``, ``decode`` or
        model-embedded shortlist; every label scored where the engine would search).
    length_norm : {None, "token", "byte"}
        Each label's log-probability as is (None: the sequence likelihood, which favours short labels), per
        token scored, or per byte of its text (lm-evaluation-harness's ``acc_norm``), before the prior and
        the fusion; the exact path only (:func:`judge.compiled.length_divisors`).
    multi_label : bool
        Judge every label on its own (transformers' keyword): ``predict_proba`` per-label probabilities, ``predict``
        a list of labels per text (possibly empty), ``calibrate``/``fit`` take label lists: :mod:`judge.multilabel`.

    Attributes
    ----------
    classes_ : ndarray of object, shape (K,)
    model_, tokenizer_ : the loaded model and tokenizer (after first use)
    method_ : str
        The scoring path in use; ``engine_.path_`` says whether the tree pass
        or the exact fallback runs it.
    calibration_ : Calibration or None
    adaptation_ : None, or what :meth:`fit` fitted (``kind``: "head", "lora" or "demos")
    bias_, temperature_, threshold_ : fitted by :meth:`calibrate`
    search_report_ : judge.engine.SearchResult or None (the last certified search's report)

    Examples
    --------
    With the packaged SmolLM2-135M-Instruct (offline; loaded on first use):

    >>> clf = Classifier(["card_arrival", "exchange_rate"])
    >>> clf.predict(["When will my new card arrive?"])
    array(['card_arrival'], dtype=object)
    >>> clf.predict_proba(["When will my new card arrive?"]).round(1)
    array([[1., 0.]])

    Any causal LM and its tokenizer (here a tiny random one, as the tests use):

    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> Classifier(["positive", "negative"], model, tokenizer=tok).classes_
    array(['positive', 'negative'], dtype=object)
    """

    def __init__(self, labels, model=None, *, tokenizer=None, method="auto", prompt=None,
                 label_names=None, batch_size=8, device=None, think=False, think_tokens=128,
                 top_k=5, decode_above=2000, end_token="auto", progress=None, batch_invariant=False,
                 pack=1, rotations=1, search_budget=20_000, search_tolerance=1e-3, shortlist=None,
                 shortlist_encoder=None, backend="transformers", prior="auto", describe="auto", embedder="auto",
                 length_norm=None, multi_label=False):
        given = {name: value for name, value in locals().items() if name in PARAM_NAMES}
        object.__setattr__(self, "_compiled", None)
        object.__setattr__(self, "calibration_", None)
        object.__setattr__(self, "adaptation_", None)  # set by fit(): a head, adapters or demonstrations
        object.__setattr__(self, "transduction_", None)  # set by adapt(): what unlabelled texts taught
        object.__setattr__(self, "multilabel_", None)  # multi_label=True: what fit() and calibrate() fitted
        object.__setattr__(self, "search_report_", None)
        object.__setattr__(self, "_lock", threading.RLock())  # compile, fit and set_params, one at a time
        Parameters.__init__(self, given)  # checked, then stored (judge.parameters)
        self._reset_fusion(warn=True)
        _warn_descriptions(describe, self.descriptions)

    # ------------------------------------------------- parameters (judge.parameters.Parameters)
    def _store(self, name, value):
        if name == "labels":  # the list; its descriptions beside it
            object.__setattr__(self, "descriptions", label_descriptions(value))
            value = as_label_list(value)
        object.__setattr__(self, name, value)

    def _changed(self, change) -> None:
        """After parameters changed: recompile on next use, drop what was fitted for the old values."""
        if change.recompile:
            object.__setattr__(self, "_compiled", None)
        names = ", ".join(map(repr, change.refit))
        if change.refit and self.calibration_ is not None:
            warnings.warn(f"Changing {names} after calibrate() drops the calibration fitted for the old "
                          f"setting; call calibrate() again.", stacklevel=4)
            object.__setattr__(self, "calibration_", None)
        if change.refit and self.adaptation_ is not None:
            warnings.warn(f"Changing {names} after fit() drops the {self.adaptation_.kind} fitted for the old "
                          f"setting; call fit() again.", stacklevel=4)
            object.__setattr__(self, "adaptation_", None)
        if change.refit and self.multilabel_ is not None:
            warnings.warn(f"Changing {names} drops the multi-label fit and calibration made for the old setting; "
                          f"call fit() or calibrate() again.", stacklevel=4)
            object.__setattr__(self, "multilabel_", None)
        if change.fusion:
            self._reset_fusion(warn=False)

    def _guard(self):  # set_params holds the lock compile and fit hold
        return self._lock

    def __getstate__(self):  # picklable (joblib's workers): the lock, the model and its caches are not sent
        return {k: v for k, v in super().__getstate__().items() if k not in ("_lock", "_compiled", "engine_")}

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.update(_lock=threading.RLock(), _compiled=None)

    def _reset_fusion(self, warn):
        from judge.fusion import initial_fusion

        object.__setattr__(self, "fusion_", initial_fusion(
            self.embedder, self.model, len(self.labels), method=self.method, shortlist=self.shortlist,
            decode_above=self.decode_above, warn=warn))
        object.__setattr__(self, "transduction_", None)

    @property
    def embedder_(self):
        """The sentence embedder the fusion reads (``"minilm"`` for ``embedder="auto"``), or None: the LM alone."""
        from judge.fusion import embedder_in_use

        return embedder_in_use(self.embedder, self.fusion_)

    @property
    def _fused(self) -> bool:  # the embedder's similarity enters the answers (a fusion of weight > 0)
        return is_fused(self.fusion_)

    # ------------------------------------------------------------------ setup
    @property
    def classes_(self) -> np.ndarray:
        """The labels in column order of ``predict_proba``: ndarray of object, shape (K,)."""
        return np.array(self.labels, dtype=object)

    def setup(self) -> Classifier:
        """Load the model, cache the prompt prefix and compile the labels now (else on first use); returns self.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["yes", "no"], model, tokenizer=tok).setup().method_    # one token per label
        'first_token'
        """
        self._setup()
        return self

    def close(self) -> None:
        """Release the scorer (model, caches, vLLM's processes) and the compiled labels; idempotent; a context manager.

        >>> from judge.testing import tiny_pair
        >>> with Classifier(["yes", "no"], *tiny_pair()[:1], tokenizer=tiny_pair()[1]) as clf: _ = clf.predict(["?"])
        >>> "engine_" in vars(clf)
        False
        """
        with self._lock:
            engine = self.__dict__.pop("engine_", None)
            object.__setattr__(self, "_compiled", None)
        engine is None or engine.close()

    def _setup(self):
        c = self._compiled
        if c is not None:
            return c
        with self._lock:
            if self._compiled is None:
                object.__setattr__(self, "_compiled", self._compile())
            return self._compiled

    def _compile(self):
        from judge.compiled import LabelSpec, compile_labels

        if self.backend == "vllm":  # what vLLM cannot score (a fitted state too) refused before it starts
            from judge.backends.vllm import check_classifier

            check_classifier(self)
        names = label_names_for(self.labels, self.label_names, self.descriptions, self.describe)
        spec = LabelSpec(tuple(self.labels), tuple(names), **{p: getattr(self, p) for p in names_with(role="spec")})
        c = compile_labels(spec, self.__dict__.get("engine_"))
        object.__setattr__(self, "engine_", c.engine)
        return c

    @property
    def compiled_(self):
        """The compiled label set (:class:`judge.compiled.CompiledLabels`): engine, prompt split, token sequences."""
        return self._setup()

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

        ``multi_label=True``: each label's logit (the fitted head's after :meth:`fit`), before calibration.
        """
        if self.multi_label:
            return multilabel.logits(self, check_texts(texts))
        return self._scores(check_texts(texts))

    def content_free_scores(self, inputs=CONTENT_FREE) -> np.ndarray:
        """Raw label log-probabilities for content-free inputs (the ``contextual`` prior's evidence).

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
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["yes", "no"], model, tokenizer=tok).content_free_scores().shape
        (3, 2)
        """
        return self._scores(check_content_free(inputs, "content_free_scores"))

    def _scores(self, texts, transductive=False) -> np.ndarray:
        if transductive:  # label vectors moved toward this call's texts (judge.transductive)
            return transductive_scores(self, texts)
        ad = self.adaptation_  # fitted by fit(): its scores replace the zero-shot ones
        if ad is not None and ad.kind == "head":  # from the prior-corrected zero-shot scores, its states from their pass
            return ad.decision_function(self, texts, lambda t: offset_scores(self, t),
                                        lambda t: offset_scores(self, t, states=True))
        if ad is not None:  # demonstrations, adapters: from the raw scores
            return ad.decision_function(self, texts, self._zero_shot_scores)
        return self._zero_shot_scores(texts)

    def _zero_shot_scores(self, texts) -> np.ndarray:
        from judge.experts import experts  # with an embedder: the LM beside it (judge.fusion)

        return self.fusion_.combine(*experts(self, texts)) if self._fused else self._run(texts).scores

    def _run(self, texts, search=None, cal=None):
        from judge.experts import options_of  # the one dispatch; the report kept

        r = self._setup().score(texts, options_of(self), search=search, cal=cal)
        if r is not None and r.report is not None:
            object.__setattr__(self, "search_report_", r.report)
        return r

    def _search(self, texts, cal, mode, eps):
        """The certified search where it applies (not after fit; fused: the argmax only, under the per-text bias of
        :func:`judge.experts.search_correction`): (report, the correction its scores were read under), or None."""
        if self.adaptation_ is not None or (self._fused and (mode != "argmax" or self.fusion_.weight >= 1.0)):
            return None
        if self._fused:
            from judge.experts import search_correction

            cal = search_correction(self, texts, cal)
        r = self._run(texts, (mode, eps), cal)
        return r and r.report and (r.report, cal)

    def predict_proba(self, texts, *, tolerance=None, transductive="auto") -> np.ndarray:
        """Probability of each label: ndarray of shape (n, K), rows sum to 1, columns in ``classes_`` order.

        Calibrated (label bias, temperature) once :meth:`calibrate` has run.

        Parameters
        ----------
        texts : sequence of str, length n
        tolerance : float in [0, 1), optional
            0: full exact scoring (the default, except on the ``search`` path,
            whose default is ``search_tolerance``). Above 0, on the exact and
            search paths: the label trie is expanded only until the probability
            mass left unexpanded is provably at most ``tolerance`` of what was
            found, so each row is within total-variation distance ``tolerance``
            of the full exact answer (unexpanded labels get probability 0;
            ``search_report_`` says which rows reached it within
            ``search_budget``).
        transductive : {"auto", True, False}
            Move the embedder's label vectors toward this call's texts first (no label is read; each
            text's answer then depends on the others: :mod:`judge.transductive`). ``"auto"``: for
            zero-shot calls of at least ``judge.transductive.AUTO_MIN_TEXTS`` texts (chosen on validation).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> p = Classifier(["yes", "no"], model, tokenizer=tok).predict_proba(["Is water wet?"])
        >>> p.shape, round(float(p.sum()), 6)
        ((1, 2), 1.0)

        ``multi_label=True``: each label's own probability (calibrated per label by :meth:`calibrate`).
        """
        if self.multi_label:
            return multilabel.proba(self, check_texts(texts))
        if tolerance is not None and not (isinstance(tolerance, (int, float)) and 0.0 <= tolerance < 1.0):
            raise ValueError(f"tolerance must be a number in [0, 1), got {tolerance!r}.")
        texts = check_texts(texts)
        transductive = transductive_for(self, len(texts), transductive)
        kind = self.prior_for(len(texts))
        cal = call_calibration(self, kind)
        if tolerance is None:
            tolerance = self.search_tolerance if self._setup().method == "search" else 0.0
        if tolerance > 0 and texts and kind != "batch" and not transductive:
            found = self._search(texts, cal, "tolerance", float(tolerance))
            if found is not None:
                s = np.nan_to_num(found[0].dense(len(self.labels)), nan=-np.inf)
                return cal.transform(s) if cal is not None else softmax(s)
        scores = self._scores(texts, transductive)
        if kind == "batch":
            cal = call_calibration(self, kind, scores)
        proba = cal.transform(scores) if cal is not None else softmax(scores)
        warn_if_collapsed(self, proba.argmax(1) if len(proba) else [])
        return proba

    def predict(self, texts, *, abstain: bool = False, transductive="auto") -> np.ndarray:
        """The most probable label of each text (or None below ``threshold_`` with ``abstain=True``).

        On the exact and search paths the answer is exactly the argmax of full exact scoring (after
        label bias and temperature) but only the subtrees of the label trie that could still win are
        expanded, best first (:mod:`judge.engine.search`): the answer is *certified*. Past
        ``search_budget`` tokens for a text the best label found is returned, with a warning;
        ``search_report_`` holds ``certified`` and ``gap`` per text. On a GPU the exact path scores
        in full instead (the same argmax, faster there: :meth:`judge.compiled.CompiledLabels.search_pays`).
        With ``abstain=True`` the full distribution is computed (the
        threshold needs the true top probability); :meth:`predict_records` says why each None.
        ``transductive``: as in :meth:`predict_proba`.

        Returns
        -------
        ndarray of object, shape (n,)

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["yes", "no"], model, tokenizer=tok).predict(["Is water wet?"])[0] in ("yes", "no")
        True

        ``multi_label=True``: each text's list of labels at or above their thresholds (possibly empty).
        """
        if self.multi_label:
            return multilabel.predict(self, check_texts(texts), abstain=abstain)
        cal = self.calibration_
        if abstain and (cal is None or cal.threshold is None):
            raise NotCalibratedError(
                "This Classifier has no abstention threshold: call calibrate(texts, y, target_accuracy=...) "
                "or calibrate(texts, y, coverage=...) before predict(abstain=True).")
        texts = check_texts(texts)
        transductive = transductive_for(self, len(texts), transductive)
        kind = self.prior_for(len(texts))
        cal = call_calibration(self, kind)
        go = not (abstain or transductive or not texts or kind == "batch") and self.compiled_.search_pays()
        found = self._search(texts, cal, "argmax", 0.0) if go else None
        if found is not None:  # the exact argmax, proven by the prefix bound, without full scoring
            res, by = found
            top = res.argmax(*((by.bias, by.temperature) if by is not None else ()))
        else:
            scores = self._scores(texts, transductive)
            if kind == "batch":
                cal = call_calibration(self, kind, scores)
            proba = cal.transform(scores) if cal is not None else softmax(scores)
            top = np.argmax(proba, axis=1) if len(proba) else np.zeros(0, np.int64)
        warn_if_collapsed(self, top)
        out = self.classes_[top] if len(top) else np.empty(0, dtype=object)
        if abstain:  # why each None: predict_records
            note_threshold(cal)
            out[proba.max(axis=1) < cal.threshold] = None
        return out

    def fit(self, texts, y, *, method="head", random_state=0, callback=None, **options):
        """Learn from labelled texts: a head on the frozen model, LoRA adapters, or demonstrations.

        Everything is validated before any text is scored; the fitted state
        (``adaptation_``) is swapped in at the end, so a failed or interrupted
        fit leaves the classifier as it was. A calibration fitted before is
        dropped: call :meth:`calibrate` afterwards, on texts the fit never saw (after a
        head, ``bias="auto"`` is ``"cv"``). ``predict`` then scores in full (no certified search).
        Methods and options: :mod:`judge.adaptation.fit`.

        Parameters
        ----------
        texts : sequence of str, length n
        y : sequence of labels (values of ``classes_``), length n
        method : {"head", "lora", "demos"}
            ``head``: multinomial logistic regression on the answer-slot hidden state, the zero-shot
            scores its offset up to 8 texts per class (``features="auto"``; L2 by cross-validation).
            ``lora``: adapters trained on the exact label likelihood (needs ``peft``).
            ``demos``: the k nearest training texts written into each prompt.
        random_state : int
        callback : callable, optional
            Called with a small dict after every optimiser step (may raise to stop).
        **options
            The method's options (e.g. ``features``, ``l2``, ``cv``; ``rank``, ``epochs``; ``k``).

        Returns
        -------
        self

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> clf.fit(["sure", "nope", "yes!", "never"], ["yes", "no", "yes", "no"], cv=2).adaptation_.kind
        'head'
        >>> clf.predict_proba(["ok"]).shape
        (1, 2)
        """
        if self.multi_label:  # a one-vs-rest head: judge.multilabel
            return multilabel.fit_classifier(self, texts, y, method=method, random_state=random_state, **options)
        from judge.adaptation import fit_adaptation

        fitted = fit_adaptation(self, texts, y, method=method, base_scores=lambda t: offset_scores(self, t),  # zero-shot's
                                scores_states=lambda t: offset_scores(self, t, states=True),
                                random_state=random_state, callback=callback, **options)
        with self._lock:
            if self.calibration_ is not None:
                warnings.warn("fit() drops the calibration fitted before it (it was fitted on the zero-shot "
                              "scores); call calibrate() on texts the fit never saw.", stacklevel=2)
            object.__setattr__(self, "calibration_", None)
            object.__setattr__(self, "adaptation_", fitted)
        return self

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
