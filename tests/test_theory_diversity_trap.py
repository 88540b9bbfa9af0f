"""Paper 000's per-sample theorems against autograd and explicit dense loops (float64).

References: per-sample weight gradients by autograd, one sample at a time; the Lemma 1/2
decompositions and Lemma 3's terms as explicit d x h matrices per sample; the single-sample
step by an explicit copy of the model.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from collapselab.metrics.diversity import direction_strengths
from collapselab.models import MLP
from collapselab.probe import capture_mlp_state, single_sample_feature_changes
from collapselab.theory.diversity_trap import (
    common_direction_of_window,
    delta_v_feature_cosine,
    direction_strengths_of_window,
    lemma3_terms,
    neg_grad_feature_change,
    o_statistic,
    theorem1_decomposition,
    theorem1_from_state,
    theorem1_table,
    theorem2_consistency,
)

LR = 0.1
N_CLASSES = 3


def _setup(seed: int = 0, activation: str = "relu", n: int = 12, width: int = 7, depth: int = 4):
    torch.manual_seed(seed)
    model = MLP(5, N_CLASSES, width=width, depth=depth, activation=activation, negative_slope=0.1)
    model = model.double()
    x = torch.randn(n, 5, dtype=torch.float64)
    y = torch.arange(n) % N_CLASSES
    return model, x, y


def _per_sample_weight_grads(model: MLP, x, y, layer: int) -> list[np.ndarray]:
    """∂ℓ_x/∂W^(l) by autograd, one sample at a time (the independent reference)."""
    lin = ([blk.linear for blk in model.layers] + [model.classifier])[layer - 1]
    out = []
    for i in range(x.shape[0]):
        loss = F.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        (gw,) = torch.autograd.grad(loss, lin.weight)
        out.append(gw.numpy())
    return out


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
def test_capture_matches_autograd_per_sample_gradients(activation):
    model, x, y = _setup(activation=activation)
    state = capture_mlp_state(model, x, y)
    assert state.depth == 4
    for layer in range(1, 5):
        ref = _per_sample_weight_grads(model, x, y, layer)
        neg_lr_g, f = state.weight_change(layer, LR)
        for i in range(x.shape[0]):
            # ΔW|_x = -η g_x F_xᵀ = -η ∂ℓ_x/∂W
            np.testing.assert_allclose(
                torch.outer(neg_lr_g[i], f[i]).numpy(), -LR * ref[i], atol=1e-12
            )
    assert model.layers[0].linear.weight.grad is None  # parameter gradients untouched


@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
@pytest.mark.parametrize("layer", [1, 2, 3])
def test_theorem1_reconstructs_autograd_changes(activation, layer):
    model, x, y = _setup(seed=1, activation=activation)
    state = capture_mlp_state(model, x, y)
    rng = np.random.default_rng(layer)
    c_next = rng.normal(size=state.weights[layer].shape[0]) * 3.0  # any scale
    parts = theorem1_from_state(state, layer, c_next, LR)
    ref = _per_sample_weight_grads(model, x, y, layer)
    r = parts.singular_values.shape[0]
    assert parts.right_orthogonality < 1e-12  # 𝒱_kᵀC = 0 (note A12's corrected statement)
    for i in range(x.shape[0]):
        total = parts.primary_term(i) + sum(parts.noise_term(i, k) for k in range(1, r + 1))
        np.testing.assert_allclose(total.numpy(), -LR * ref[i], atol=1e-12)
        np.testing.assert_allclose(parts.change(i).numpy(), -LR * ref[i], atol=1e-12)
        # the norms are those of the dense terms
        assert parts.primary_norm[i] == pytest.approx(
            float(torch.linalg.matrix_norm(parts.primary_term(i))), rel=1e-12, abs=1e-15
        )
        for k in range(1, r + 1):
            assert parts.noise_norms[i, k - 1] == pytest.approx(
                float(torch.linalg.matrix_norm(parts.noise_term(i, k))), rel=1e-12, abs=1e-15
            )


def test_theorem1_paper_form_of_the_primary_term():
    """The paper's ``D V Cᵀ C ΔV'ᵀ F^(l) F^(l-1)ᵀ / ‖F^(l)‖²`` with an unnormalised C."""
    model, x, y = _setup(seed=2)
    state = capture_mlp_state(model, x, y)
    layer = 2
    c = np.random.default_rng(0).normal(size=7) * 0.3
    ct = torch.tensor(c)
    parts = theorem1_from_state(state, layer, c, LR)
    w_next = state.weights[layer]
    v = w_next.T @ ct / (ct @ ct)
    f_l = state.inputs[layer]  # F^(l), the input of layer l+1
    for i in range(x.shape[0]):
        dw_next = -LR * torch.outer(state.pre_grads[layer][i], f_l[i])  # ΔW^(l+1)|_x
        dv_next = dw_next.T @ ct / (ct @ ct)
        d = state.slopes[layer - 1][i]
        paper = torch.outer(d * v * (ct @ ct) * (dv_next @ f_l[i]), state.inputs[layer - 1][i])
        paper = paper / (f_l[i] @ f_l[i])
        np.testing.assert_allclose(parts.primary_term(i).numpy(), paper.numpy(), atol=1e-13)


def test_theorem1_table_pools_per_class():
    model, x, y = _setup(seed=3, n=9)
    state = capture_mlp_state(model, x, y)
    c = np.ones(7)
    p1 = theorem1_from_state(state, 2, c, LR)
    p2 = theorem1_from_state(state, 2, -2 * c, LR)  # same parts: C's sign and scale cancel
    np.testing.assert_allclose(p1.primary_norm, p2.primary_norm, rtol=1e-12)
    table = theorem1_table([p1, p2], [y, y], N_CLASSES, n_noise=2)
    for k in range(N_CLASSES):
        sel = (y == k).numpy()
        vals = np.concatenate([p1.primary_norm[sel], p2.primary_norm[sel]])
        assert table.primary_mean[k] == pytest.approx(vals.mean(), rel=1e-12)
        assert table.primary_std[k] == pytest.approx(vals.std(), rel=1e-12, abs=1e-18)
        noise = np.concatenate([p1.noise_norms[sel, :2], p2.noise_norms[sel, :2]])
        np.testing.assert_allclose(table.noise_mean[k], noise.mean(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(table.counts, [6, 6, 6])
    np.testing.assert_allclose(table.ratio, table.primary_mean / table.noise_mean.max(axis=1))


def _dense_lemma(w, c, g_x, f_x, lr):
    """Lemma 1/2 for one sample with explicit d x h matrices."""
    cc = c @ c
    dw_t = (-lr * np.outer(g_x, f_x)).T  # (d, h)
    dv = dw_t @ c / cc
    deps = dw_t - np.outer(dv, c)
    v = w.T @ c / cc
    eps = w.T - np.outer(v, c)
    return dv, deps, v, eps


def test_lemma3_terms_against_dense_matrices():
    rng = np.random.default_rng(4)
    n, h, d = 10, 6, 8
    w = rng.normal(size=(h, d))
    g = rng.normal(size=(n, h))
    f = np.abs(rng.normal(size=(n, d)))
    c = rng.normal(size=h) * 2.0
    terms = lemma3_terms(f, g, w, c, LR)
    for i in range(n):
        dv, deps, v, eps = _dense_lemma(w, c, g[i], f[i], LR)
        a = dv @ f[i]
        assert terms.primary[i] == pytest.approx(a * (v @ v) * (c @ c) * a, rel=1e-12)
        assert terms.noise[i] == pytest.approx(a * (v @ eps @ deps.T @ f[i]), rel=1e-10)
    # Lemma 3's proof: o^(l) under ΔF = -Ḟ has the sign of primary + noise
    o = o_statistic(f, g, w, c)["neg_grad"]
    np.testing.assert_array_equal(np.sign(o), np.sign(terms.primary + terms.noise))
    assert np.all(terms.dominance >= 0)


def test_o_statistic_modes_against_loops():
    model, x, y = _setup(seed=5, n=9)
    state = capture_mlp_state(model, x, y)
    layer = 3
    w, f, g = state.weights[layer - 1], state.inputs[layer - 1], state.pre_grads[layer - 1]
    c = torch.tensor(np.random.default_rng(5).normal(size=w.shape[0]))
    params_before = [p.detach().clone() for p in model.parameters()]
    single = single_sample_feature_changes(model, x, y, layer, LR)
    for p, q in zip(model.parameters(), params_before, strict=True):
        assert torch.equal(p.detach(), q)  # the model is left exactly as it was
    # reference for the single-sample step: an explicit copy of the model per sample
    for i in range(x.shape[0]):
        twin = copy.deepcopy(model)
        opt = torch.optim.SGD(twin.parameters(), lr=LR)
        F.cross_entropy(twin(x[i : i + 1]), y[i : i + 1]).backward()
        opt.step()
        after = capture_mlp_state(twin, x[i : i + 1], y[i : i + 1]).inputs[layer - 1][0]
        np.testing.assert_allclose(single[i].numpy(), (after - f[i]).numpy(), atol=1e-13)
    batch = torch.randn_like(f)
    out = o_statistic(f, g, w, c, {"single_sample_step": single, "batch_step": batch})
    assert set(out) == {"neg_grad", "single_sample_step", "batch_step"}
    v = (w.T @ c / (c @ c)).numpy()
    ref_df = {"neg_grad": -(g @ w).numpy(), "single_sample_step": single.numpy()}
    ref_df["batch_step"] = batch.numpy()
    np.testing.assert_allclose(ref_df["neg_grad"], neg_grad_feature_change(w, g).numpy())
    for mode, df in ref_df.items():
        for i in range(x.shape[0]):
            dv = _dense_lemma(w.numpy(), c.numpy(), g[i].numpy(), f[i].numpy(), LR)[0]
            fi = f[i].numpy()
            cos1 = dv @ fi / (np.linalg.norm(dv) * np.linalg.norm(fi))
            cos2 = v @ df[i] / (np.linalg.norm(v) * np.linalg.norm(df[i]))
            assert out[mode][i] == pytest.approx(cos1 * cos2, abs=1e-12)


def test_delta_v_feature_cosine_sources():
    rng = np.random.default_rng(6)
    n, h, d = 12, 5, 7
    f = np.abs(rng.normal(size=(n, d)))
    g = rng.normal(size=(n, h))
    y = np.arange(n) % N_CLASSES
    c = rng.normal(size=h)
    per = delta_v_feature_cosine(f, y, c, N_CLASSES, pre_grads=g)
    # per-sample ΔV: cos = -sign(Cᵀg) exactly (note A6)
    np.testing.assert_allclose(per.raw, -np.sign(g @ c), atol=1e-12)
    for k in range(N_CLASSES):
        sel = y == k
        major = -1 if (per.raw[sel] < 0).sum() > (per.raw[sel] > 0).sum() else 1
        assert per.alpha[k] == major
        np.testing.assert_allclose(per.values[sel], major * per.raw[sel])
        assert per.mean[k] == pytest.approx(per.values[sel].mean())
    dw = rng.normal(size=(h, d))
    one = delta_v_feature_cosine(f, y, c, N_CLASSES, delta_w=dw)
    dv = dw.T @ c / (c @ c)
    ref = np.array([dv @ f[i] / (np.linalg.norm(dv) * np.linalg.norm(f[i])) for i in range(n)])
    np.testing.assert_allclose(one.raw, ref, atol=1e-12)
    with pytest.raises(ValueError, match="exactly one of"):
        delta_v_feature_cosine(f, y, c, N_CLASSES)


def test_theorem2_eq26_and_consistency():
    rng = np.random.default_rng(7)
    n, h, d = 15, 4, 6
    f = np.abs(rng.normal(size=(n, d))) + 0.1
    c = rng.normal(size=h)
    y = np.arange(n) % N_CLASSES
    g = rng.normal(size=(n, h))
    g[y == 0] += 5 * c  # class 0: every Cᵀg > 0
    res = theorem2_consistency(f, g, y, c, N_CLASSES)
    coef = g @ c
    per = delta_v_feature_cosine(f, y, c, N_CLASSES, pre_grads=g)
    for k in range(N_CLASSES):
        idx = np.nonzero(y == k)[0]
        pairs = [(i, j) for i in idx for j in idx if i != j]
        # Eq. 26, pair by pair
        for i, j in pairs:
            assert np.sign(per.raw[i] * per.raw[j]) == np.sign(coef[i] * coef[j])
        hyp = np.mean([coef[i] * coef[j] > 0 for i, j in pairs])
        assert res.hypothesis[k] == pytest.approx(hyp)
        assert res.conclusion[k] == pytest.approx(np.mean(per.values[idx] >= 0))
    assert res.hypothesis[0] == 1.0 and res.conclusion[0] == 1.0


def test_layer_and_probe_errors():
    model, x, y = _setup()
    state = capture_mlp_state(model, x, y)
    with pytest.raises(ValueError, match=r"layer 4 is out of range.*layers 1\.\.3"):
        theorem1_from_state(state, 4, np.ones(3), LR)
    with pytest.raises(ValueError, match=r"layer 0 is out of range.*layers 1\.\.4"):
        state.weight_change(0, LR)
    with pytest.raises(ValueError, match=r"layer 5 is out of range"):
        single_sample_feature_changes(model, x, y, 5, LR)
    with pytest.raises(ValueError, match=r"no sample of class 2; expected every class 0\.\.2"):
        delta_v_feature_cosine(
            state.inputs[1],
            np.array([0, 1] * 6),
            np.ones(7),
            N_CLASSES,
            pre_grads=state.pre_grads[1],
        )
    with pytest.raises(ValueError, match="c_next has length 3; expected 7"):
        theorem1_from_state(state, 1, np.ones(3), LR)
    normed = MLP(5, N_CLASSES, width=7, depth=3, norm="norm1").double()
    s2 = capture_mlp_state(normed, x, y)
    with pytest.raises(ValueError, match="normalisation"):
        theorem1_from_state(s2, 1, np.ones(7), LR)


def test_theorem1_decomposition_shape_errors():
    with pytest.raises(ValueError, match=r"weight_next has shape \(3, 4\); expected \(3, 5\)"):
        theorem1_decomposition(
            np.ones((2, 6)), np.ones((2, 5)), np.ones((3, 4)), np.ones((2, 3)), np.ones(3), LR
        )


def test_published_vs_corrected_orthogonality_of_theorem1():
    """Note A12: 𝒱_kᵀC = 0 holds; the printed 𝒰_kᵀC = 0 (defined only for h = h') does not."""
    model, x, y = _setup(seed=8)  # hidden layers 7 -> 7: h = h'
    state = capture_mlp_state(model, x, y)
    parts = theorem1_from_state(state, 1, np.random.default_rng(1).normal(size=7), LR)
    assert parts.right_orthogonality < 1e-12
    assert parts.published_orthogonality is not None and parts.published_orthogonality > 1e-3
    last = theorem1_from_state(state, 3, np.ones(N_CLASSES), LR)  # W^(4) is 3 x 7: h != h'
    assert last.published_orthogonality is None
    assert last.right_orthogonality < 1e-12


def _window_states(model, x, y, steps: int = 3):
    """Captures at three iterations of full-batch SGD (a window)."""
    states = []
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(steps):
        states.append(capture_mlp_state(model, x, y))
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return states


@pytest.mark.parametrize("source", ["per_sample", "probe_mean"])
def test_common_direction_of_window_against_direct_svd(source):
    model, x, y = _setup(seed=9)
    states = _window_states(model, x, y)
    layer, cls = 2, [0, 2]
    blocks = []
    for st in states:
        sel = np.isin(st.labels.numpy(), cls)
        g, f = st.pre_grads[layer - 1].numpy()[sel], st.inputs[layer - 1].numpy()[sel]
        changes = [-LR * np.outer(g[i], f[i]) for i in range(len(g))]
        blocks += changes if source == "per_sample" else [np.mean(changes, axis=0)]
    u, s, _ = np.linalg.svd(np.concatenate(blocks, axis=1), full_matrices=False)
    res = common_direction_of_window(states, layer, LR, classes=cls, source=source, k=2)
    for i in range(2):
        assert abs(res.directions[:, i].numpy() @ u[:, i]) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(res.eigenvalues, s[:2] ** 2, rtol=1e-9)
    with pytest.raises(ValueError, match="has no sample of classes"):
        common_direction_of_window(states, layer, LR, classes=[7])
    with pytest.raises(ValueError, match="layer 9 is out of range"):
        common_direction_of_window(states, 9, LR)


def test_batch_step_feature_change_between_captures():
    model, x, y = _setup(seed=10)
    before = capture_mlp_state(model, x, y)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    F.cross_entropy(model(x[:6]), y[:6]).backward()
    opt.step()
    after = capture_mlp_state(model, x, y)
    df = before.feature_change_to(after, 3)
    with torch.no_grad():
        h = model.layers[1](model.layers[0](x))  # F^(2), the input of layer 3, after the step
    np.testing.assert_allclose(df.numpy(), (h - before.inputs[2]).numpy(), atol=1e-13)
    other = capture_mlp_state(model, x + 1.0, y)
    with pytest.raises(ValueError, match="same probe samples"):
        before.feature_change_to(other, 3)


def test_neg_grad_is_minus_the_autograd_feature_gradient_and_eq16_splits_it():
    """ΔF := -Ḟ^(l-1) against autograd, and Eq. 16: Ḟ^(l-1) = V (Cᵀg) + ε g (Lemma 2)."""
    model, x, y = _setup(seed=11)
    state = capture_mlp_state(model, x, y)
    layer = 3
    xg = x.clone()
    feats = model.layers[1](model.layers[0](xg)).detach().requires_grad_(True)  # F^(2)
    h = model.layers[2](feats)
    losses = F.cross_entropy(model.classifier(h), y, reduction="none")
    (fdot,) = torch.autograd.grad(losses.sum(), feats)  # rows: each sample's own Ḟ^(2)
    w, g = state.weights[layer - 1], state.pre_grads[layer - 1]
    np.testing.assert_allclose(neg_grad_feature_change(w, g).numpy(), -fdot.numpy(), atol=1e-13)
    c = torch.tensor(np.random.default_rng(3).normal(size=w.shape[0]))
    v = w.T @ c / (c @ c)
    eps = w.T - torch.outer(v, c)
    split = (g @ c)[:, None] * v[None, :] + g @ eps.T
    np.testing.assert_allclose(split.numpy(), fdot.numpy(), atol=1e-13)


def test_direction_strengths_of_window_against_manual_changes():
    model, x, y = _setup(seed=12)
    states = _window_states(model, x, y)
    res = direction_strengths_of_window(states, 2, LR, classes=[1], k=3)
    sel = (y == 1).numpy()
    manual = []
    for st in states:
        g, f = st.pre_grads[1].numpy()[sel], st.inputs[1].numpy()[sel]
        manual.append(np.mean([-LR * np.outer(g[i], f[i]) for i in range(len(g))], axis=0))
    ref = direction_strengths(manual, k=3)
    np.testing.assert_allclose(res.strengths, ref.strengths, rtol=1e-12)
    np.testing.assert_allclose(
        np.abs(np.sum(res.directions.numpy() * ref.directions.numpy(), axis=0)), 1.0, atol=1e-10
    )


def test_gamma_cosine_against_loop():
    model, x, y = _setup(seed=13)
    state = capture_mlp_state(model, x, y)
    parts = theorem1_from_state(state, 2, np.ones(7), LR)
    c = np.random.default_rng(2).normal(size=7)
    got = parts.gamma_cosine(c)
    for i in range(x.shape[0]):
        gi = parts.gamma[i].numpy()
        n = np.linalg.norm(gi)
        assert got[i] == pytest.approx(
            0.0 if n == 0 else gi @ c / (n * np.linalg.norm(c)), abs=1e-12
        )


def test_theorem1_table_spread_readings():
    """Note A11: the "±" as pooled std, mean within-iteration std, or std of iteration means."""
    model, x, y = _setup(seed=14, n=9)
    states = _window_states(model, x, y)
    parts = [theorem1_from_state(st, 2, np.ones(7), LR) for st in states]
    labels = [st.labels for st in states]
    for spread in ("pooled", "samples", "iterations"):
        table = theorem1_table(parts, labels, N_CLASSES, n_noise=2, spread=spread)
        for k in range(N_CLASSES):
            per_t = [
                p.primary_norm[(lab == k).numpy()] for p, lab in zip(parts, labels, strict=True)
            ]
            assert table.primary_mean[k] == pytest.approx(np.mean([v.mean() for v in per_t]))
            ref = {
                "pooled": np.concatenate(per_t).std(),
                "samples": np.mean([v.std() for v in per_t]),
                "iterations": np.std([v.mean() for v in per_t]),
            }[spread]
            assert table.primary_std[k] == pytest.approx(ref, rel=1e-12, abs=1e-18)
    with pytest.raises(ValueError, match="spread must be one of"):
        theorem1_table(parts, labels, N_CLASSES, spread="runs")
