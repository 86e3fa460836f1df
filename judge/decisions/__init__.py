"""Typed decisions: choice, yes/no and score questions about one state.

A *decision* is a question about a piece of content (the **state**) whose answer is
one of a fixed set of options: `Choice` (the contract's ``choice``), `YesNo`
(``noul``) and `Score` (``score``) cover TypeSafe's System One wire contract
(``/v1/systemone``). `Decider.ask` renders one prompt per question, scores the exact
log-probability of what the model would write for every option (an option's
description where it has one: an opaque id such as ``o0`` is never the answer) in
**one** scoring call, divides out each question's prior (no labels needed: by default
its mean answer over content-free states, computed once per question shape and cached;
opt-in, ``bias="running"``, its mean answer over the states it has been asked about), and
returns an `Answer` per question with its
probabilities and the contract's reference confidence. The prompt style of each
question type (`DEFAULT_STYLES`) was chosen on validation data (bench/decisions_quality.py
select; docs/decisions_design.md has the table).

Each question is isolated: its prompt never contains the question id or any other
question, and options are listed (and scored) in a canonical order, so an answer does
not change when the question is renamed, reordered, asked alone or with others, or when
its options are given in another order.

In the order data flows:

* `~judge.decisions.questions` — the question types, `Answer`, `render_value`, the
  reference confidences, `check_questions`;
* `~judge.decisions.prompts` — `PromptStyle`, how a question becomes prompt pieces and
  the strings scored for its options;
* `~judge.decisions.priors` — `QuestionPriors`: the label-free bias correction's state,
  per question shape (content-free, then running);
* `~judge.decisions.planning` — `RequestPlan`: a request's prompts lowered to the
  token-level items that are scored (`judge.engine.lower_queries`), and its price;
* `~judge.decisions.decider` — `Decider`: plans (`Decider.plan_request`), one scoring call
  for several plans (`Decider.answer`; the `judge.engine.Scorer` protocol), spellings summed,
  the content-free bias correction, normalisation, answers; token counts;
* `~judge.decisions.calibration` — `DecisionCalibration` (a temperature per type, a
  yes/no bias, per-level score biases) and `calibrate_decisions` (labelled rows);
* `~judge.decisions.scanners`, `~judge.decisions.pieces`, `~judge.decisions.guard` —
  steering resistance, opt-in (``Decider(guard=...)``, ``ask(..., guard=...)``): content
  scanners, a state cut into pieces, erased variants scored in the same call, `Guard` and
  the `GuardReport` each guarded answer carries;
* `~judge.decisions.profiles` — `DecisionProfile` and `fit_profile`: per question shape, a
  head fitted on a few labelled states (answer-slot hidden state, zero-shot scores as its
  offset), used by ``Decider(profile=...)`` and ``judge serve --profile``;
* `~judge.decisions.setup` — the scorer, prompt styles and model name a `Decider` resolves.

What it deliberately does not do: HTTP, the JSON wire form and labelled files
(``judge.server``: it imports this package, never the other way round),
images, generation, or parsing special tokens out of any text a caller supplies (user
text is always tokenized as plain text).

Examples
--------
>>> from judge.decisions import Decider, YesNo
>>> from judge.testing import tiny_pair
>>> a = Decider(*tiny_pair()).ask("I was charged twice", {"refund": YesNo("Refund?")})["refund"]
>>> a.type, round(a.probabilities["true"] + a.probabilities["false"], 9)
('noul', 1.0)
"""

from judge.decisions.calibration import DecisionCalibration, calibrate_decisions
from judge.decisions.decider import Decider
from judge.decisions.guard import Flag, Guard, GuardReport
from judge.decisions.pieces import Piece, cut
from judge.decisions.planning import RequestPlan
from judge.decisions.priors import BIAS_METHODS, QuestionPriors
from judge.decisions.profiles import DecisionProfile, fit_profile
from judge.decisions.prompts import (
    CONTENT_FREE,
    DEFAULT_STYLES,
    NO_SPELLINGS,
    PROMPT_VERSION,
    YES_SPELLINGS,
    Plan,
    PromptStyle,
    is_opaque_id,
    plan_question,
    state_text,
)
from judge.decisions.questions import (
    MAX_LISTED_OPTIONS,
    MAX_OPTIONS,
    MAX_SCORE_LEVELS,
    Answer,
    Choice,
    DecisionError,
    Question,
    Score,
    YesNo,
    check_questions,
    choice_confidence,
    render_value,
    score_confidence,
)
from judge.decisions.scanners import SCANNERS, Finding, scan

__all__ = [
    "Choice",
    "YesNo",
    "Score",
    "Answer",
    "Decider",
    "DecisionError",
    "DecisionCalibration",
    "calibrate_decisions",
    "render_value",
    # steering resistance
    "Guard",
    "GuardReport",
    "Flag",
    "Finding",
    "Piece",
    "SCANNERS",
    "cut",
    "scan",
    # fitted profiles
    "DecisionProfile",
    "fit_profile",
    "MAX_LISTED_OPTIONS",
    "check_questions",
    # prompt styles, what is scored, the bias correction's inputs
    "PromptStyle",
    "DEFAULT_STYLES",
    "is_opaque_id",
    "YES_SPELLINGS",
    "NO_SPELLINGS",
    "CONTENT_FREE",
    "BIAS_METHODS",
    "QuestionPriors",
    # the limits, the confidences, the prompt plans
    "MAX_OPTIONS",
    "MAX_SCORE_LEVELS",
    "PROMPT_VERSION",
    "Plan",
    "Question",
    "RequestPlan",
    "choice_confidence",
    "plan_question",
    "score_confidence",
    "state_text",
]
