"""The requests bench/serve.py sends: support tickets, a pool of questions, and request bodies built from them.

`request` is the ``POST /v1/systemone`` body of request ``i``: a ticket of `TICKETS` (numbered, so
no two bodies are equal) with ``n_questions`` question shapes of `shape`, each a choice of
``n_options`` options (`criteria`: the ten teams of `LABELS`, then numbered queues) worded by
one of `ASPECTS`. `QUESTIONS` is a fixed set of mixed question types (choice, noul, score).

What it deliberately does not do: send anything or time anything (bench/serve.py does).
"""

from __future__ import annotations

__all__ = ["ASPECTS", "LABELS", "QUESTIONS", "TICKETS", "criteria", "request", "shape"]

LABELS = {
    "Billing": "Payments, invoices, refunds, charges", "Technical": "Bugs, errors, outages, integrations",
    "Account": "Login, password, profile, access", "Sales": "Pricing, quotes, upgrades, new contracts",
    "Shipping": "Delivery status, tracking, lost parcels", "Returns": "Sending items back, exchanges",
    "Security": "Fraud, phishing, suspicious activity", "Feedback": "Praise, complaints without a request, suggestions",
    "Legal": "Privacy requests, contracts, compliance", "Other": None,
}
TICKETS = [
    "I was charged twice for my March invoice and the refund still hasn't arrived.",
    "The dashboard shows a 500 error every time I open the reports tab.",
    "I forgot my password and the reset email never comes.",
    "Can I get a quote for 40 seats on the enterprise plan?",
    "My parcel was marked delivered but nothing is at my door.",
    "I want to return the blue jacket, it is too small.",
    "Someone logged into my account from another country last night.",
    "Just wanted to say your support team was fantastic this week!",
    "Please delete all personal data you hold about me under GDPR.",
    "Do you sponsor local football clubs?",
]
QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": LABELS},
    "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
    "urgent": {"type": "noul", "instructions": "Does the customer need an answer today?"},
    "anger": {"type": "score", "instructions": "How frustrated is the customer?",
              "criteria": ["Calm", "Somewhat frustrated", "Very angry"]},
    "lang": {"type": "choice", "instructions": "Which language is the ticket in?",
             "criteria": {"English": None, "German": None, "French": None, "Other": None}},
    "sentiment": {"type": "choice", "instructions": "Overall sentiment?",
                  "criteria": {"positive": None, "neutral": None, "negative": None}},
    "churn": {"type": "noul", "instructions": "Is the customer likely to cancel?"},
    "polite": {"type": "score", "instructions": "How polite is the message?", "criteria": ["Rude", "Neutral", "Polite"]},
}
ASPECTS = ["handle this ticket", "own the follow-up", "be copied", "review the reply", "escalate to", "audit this",
           "answer first", "track this case"]


def criteria(n_options: int) -> dict:
    items = list(LABELS.items())
    if n_options <= len(items):
        return dict(items[:n_options])
    return {**LABELS, **{f"Queue {i:03d}": None for i in range(n_options - len(items))}}


def shape(k: int, n_options: int) -> dict:
    """Question shape ``k`` of the pool: a choice of ``n_options`` (distinct wording per k)."""
    aspect = ASPECTS[k % len(ASPECTS)] + (f" (view {k // len(ASPECTS)})" if k >= len(ASPECTS) else "")
    return {"type": "choice", "instructions": f"Which team should {aspect}?", "criteria": criteria(n_options)}


def request(i: int, n_options: int, n_questions: int) -> dict:
    return {"model": "jev-latest", "state": f"{TICKETS[i % len(TICKETS)]} (#{i})",
            "questions": {f"q{k}": shape(k, n_options) for k in range(n_questions)}}
