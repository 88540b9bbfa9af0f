"""Paper 003's pre-registration (:mod:`collapselab.experiments.preregistration`): every
claim's tier and registered reading, and their history.

``mse-nc-theory`` runs the paper's central-path dynamics and UFM at every preset: ``paper``.
``mse-nc-collapse`` runs the paper's networks and datasets at ``paper`` and one of its
combinations (VGG11 on Fashion-MNIST) at ``standard``; ``quick`` trains MLPs on Fashion-MNIST
and MNIST-1D: ``paper, substituted`` there. Prop. 2 as published is an erratum
demonstration (note 003 §3.9).
"""

from collapselab.experiments.preregistration import (
    ERRATUM,
    PAPER,
    Register,
    Registered,
    Substitution,
    Tiering,
)

QUICK_MLPS = Substitution(
    what="MLPs on Fashion-MNIST and MNIST-1D (and a ResNet-18 arm) for the paper's VGG, ResNet "
    "and DenseNet on its five datasets",
    why="minutes on two CPU cores; standard runs VGG11 on Fashion-MNIST, paper every combination",
    faithful=("standard", "paper"),
)

REGISTER = Register(
    paper="003",
    registered="2026-11-28, at 7c5c37e (integ3)",
    experiments={
        "mse-nc-collapse": Tiering(PAPER, QUICK_MLPS),
        "mse-nc-theory": Tiering(PAPER),
    },
    claims={
        "reaches-terminal-phase": Registered(
            "every arm (MSE and CE): first measured epoch with training accuracy 1 <= the "
            "first epoch count after which the step schedule lowers the rate (E // 3)"
        ),
        "central-path-negligible": Registered(
            "for every MSE arm: L_LS_perp / L_LS <= 0.1 at every measured epoch from the "
            "first zero-training-error epoch to the end"
        ),
        "nc1-term-dominant": Registered(
            "for every MSE arm at the last epoch: L_NC1 >= L_NC2/3 and L_NC1 >= L_LS_perp"
        ),
        "nc23-falls-faster-than-nc1": Registered(
            "for every MSE arm: the least-squares slope of log10 L_NC2/3 against log10 "
            "epoch (epochs >= 1) is negative and <= that of log10 L_NC1"
        ),
        "equinorm-falls": Registered(
            "for every MSE arm and each of nc2_equinorm_means, nc2_equinorm_classifiers: "
            "value at the last epoch <= 1/2 of its value at the first zero-training-error "
            "epoch"
        ),
        "equiangularity-falls": Registered(
            "for every MSE arm and each of nc2_equiangle_means, nc2_equiangle_classifiers: "
            "value at the last epoch <= 1/2 of its value at the first zero-training-error "
            "epoch"
        ),
        "max-equiangularity-falls": Registered(
            "for every MSE arm and each of nc2_maxangle_means, nc2_maxangle_classifiers: "
            "value at the last epoch <= 1/2 of its value at the first zero-training-error "
            "epoch"
        ),
        "self-duality-falls": Registered(
            "for every MSE arm and each of nc3_self_duality: value at the last epoch <= 1/2 "
            "of its value at the first zero-training-error epoch"
        ),
        "nc1-falls": Registered(
            "for every MSE arm and each of nc1: value at the last epoch <= 1/2 of its value "
            "at the first zero-training-error epoch"
        ),
        "ncc-mismatch-falls": Registered(
            "for every MSE arm and each of nc4_ncc_mismatch: value at the last epoch <= 1/2 "
            "of its value at the first zero-training-error epoch (or exactly 0 at the end)"
        ),
        "test-accuracy-improves": Registered(
            "median over MSE arms of (test accuracy at the last epoch - at the first "
            "zero-training-error epoch), in percentage points, > 0"
        ),
        "robustness-improves": Registered(
            "median over MSE arms of (DeepFool mean ||r||/||x|| at the last epoch - at the "
            "first zero-training-error epoch) > 0"
        ),
        "mse-collapses-faster-than-ce": Registered(
            "for every dataset/net combination: train NC1 at the last epoch is lower under "
            "MSE than under cross-entropy (same data, network, initialisation and budget)"
        ),
        "mse-more-robust-than-ce": Registered(
            "median over combinations of log10(DeepFool ratio MSE / CE) at the last epoch > 0"
        ),
        "test-nc1-above-train": Registered(
            "for every MSE arm: test NC1 > train NC1 at the last epoch"
        ),
        "test-nc1-decreases-slower": Registered(
            "for every MSE arm: test NC1(end)/NC1(zero-error epoch) < 1 and > the same "
            "ratio on the training data"
        ),
        "snr-singular-vectors-frozen": Registered(
            "max over records of |(|U_t^T U_0| - I)| and the same for V <= 1e-08"
        ),
        "snr-follows-a-closed-form": Registered(
            "min over the published and corrected closed forms of max_t,j |omega_sim - "
            "omega_pred| / omega_pred <= 0.01"
        ),
        "snr-follows-published-closed-form": Registered(
            "max_t,j |omega_sim - omega_published| / omega_published <= 0.01",
            Tiering(ERRATUM, note="Prop. 2, Eq. 9 as published (note 003 §3.9)"),
        ),
        "snr-values-grow-and-equalise": Registered(
            "final max/min <= 1 + (initial max/min - 1)/10, and the smallest final value "
            "exceeds the largest initial one"
        ),
        "ufm-central-path-negligible": Registered(
            "L_LS_perp / L_LS <= 0.1 at every record from step 0.01 x n_steps on"
        ),
        "ufm-nc23-falls-faster-than-nc1": Registered(
            "least-squares slope of log10 L_NC2/3 against log10 step (steps >= 1) negative "
            "and <= that of log10 L_NC1"
        ),
        "ufm-nc1-falls": Registered("NC1 at the last step <= 1/100 of NC1 at step 0"),
    },
)
