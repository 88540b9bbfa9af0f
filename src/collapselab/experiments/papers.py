"""The five papers collapselab reproduces, and how a paper is named on the command line.

``collapselab reproduce 003``, ``reproduce mse-nc`` and ``reproduce MSE_NC`` all mean the same
paper: a name is matched, ignoring case and punctuation, against each paper's number (with
or without leading zeros), short name and aliases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """A reproduced paper: ``number`` as in ``shared/papers/``, a ``short`` name, its title."""

    number: str
    short: str
    title: str
    aliases: tuple[str, ...] = ()

    def keys(self) -> set[str]:
        """Every normalised name this paper answers to."""
        names = {self.number, str(int(self.number)), self.short, *self.aliases}
        return {_normalise(n) for n in names}

    @property
    def label(self) -> str:
        return f"{self.number} {self.short}"


PAPERS: tuple[Paper, ...] = (
    Paper(
        "000",
        "FD",
        "Trap of Feature Diversity in the Learning of MLPs",
        ("feature-diversity", "diversity"),
    ),
    Paper(
        "001",
        "PFC",
        "Progressive Feedforward Collapse of ResNet Training",
        ("progressive-feedforward-collapse", "progressive-collapse"),
    ),
    Paper(
        "002",
        "PCB",
        "Convergence Analysis of Over-parameterized Deep Linear Networks, and the Principal "
        "Components Bias",
        ("pc-bias", "pcbias", "deep-linear"),
    ),
    Paper(
        "003",
        "MSE-NC",
        "Neural Collapse Under MSE Loss: Proximity to and Dynamics on the Central Path",
        ("nc-mse", "central-path"),
    ),
    Paper(
        "004",
        "DLUFM",
        "Unifying Low Dimensional Observations in Deep Learning through the Deep Linear "
        "Unconstrained Feature Model",
        ("deep-linear-ufm", "dl-ufm"),
    ),
)


def _normalise(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def find_paper(name: str) -> Paper | None:
    """The paper called ``name`` (number, short name or alias; case and punctuation ignored)."""
    key = _normalise(str(name))
    if not key:
        return None
    for paper in PAPERS:
        if key in paper.keys():
            return paper
    return None


def same_paper(a: str, b: str) -> bool:
    """Whether two paper names denote the same paper (free text compared when unknown)."""
    paper_a, paper_b = find_paper(a), find_paper(b)
    if paper_a is not None or paper_b is not None:
        return paper_a is paper_b
    return _normalise(a) == _normalise(b)


def paper_label(name: str) -> str:
    """``"003 MSE-NC"`` for a known paper name, the name itself otherwise."""
    paper = find_paper(name)
    return paper.label if paper is not None else name
