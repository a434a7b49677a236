"""tightdp.integrations.opacus: TightAccountant inside real Opacus training loops."""

from __future__ import annotations

import copy
import re
import warnings
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chisquare

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

from opacus import PrivacyEngine  # noqa: E402
from opacus.accountants import RDPAccountant, create_accountant  # noqa: E402
from opacus.accountants.utils import get_noise_multiplier as opacus_noise  # noqa: E402

import oracle  # noqa: E402
import tightdp  # noqa: E402
from tightdp.integrations.opacus import (  # noqa: E402
    RandomAllocationSampler,
    TightAccountant,
    convert_state_dict,
    get_noise_multiplier,
)

try:
    import dp_accounting  # noqa: F401
    HAVE_DPACC = True
except ImportError:  # a peer: its cross-checks are skipped, the rest runs
    HAVE_DPACC = False

ROOT = Path(__file__).resolve().parents[1]
DELTA = 1e-5
N_DATA, BATCH = 200, 10  # q = 1 / len(loader) = 0.05, 20 steps per epoch


def _setup(seed: int = 0, accountant: str = "tightdp"):
    torch.manual_seed(seed)
    x = torch.randn(N_DATA, 5)
    y = (x[:, 0] > 0).long()
    data = torch.utils.data.TensorDataset(x, y)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH)
    model = torch.nn.Linear(5, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return PrivacyEngine(accountant=accountant), model, opt, loader


def _train(model, opt, loader, epochs: int, on_step=None) -> int:
    steps = 0
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
            steps += 1
            if on_step is not None:
                on_step(steps)
    return steps


def _private(engine, model, opt, loader, sigma: float):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                   noise_multiplier=sigma, max_grad_norm=1.0)


def _dpacc_schedule(runs, optimistic: bool, grid: float = 1e-4) -> float:
    """eps of a schedule with dp_accounting's PLD (pessimistic or optimistic rounding)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_mod
    total = None
    for sigma, q, n in runs:
        p = pld_mod.from_gaussian_mechanism(sigma, pessimistic_estimate=not optimistic,
                                            value_discretization_interval=grid,
                                            sampling_prob=q).self_compose(n)
        total = p if total is None else total.compose(p)
    return total.get_epsilon_for_delta(DELTA)


def test_registered_with_opacus():
    assert isinstance(create_accountant("tightdp"), TightAccountant)
    assert isinstance(PrivacyEngine(accountant="tightdp").accountant, TightAccountant)
    assert TightAccountant.mechanism() == "tightdp"


def test_training_loop_matches_dpsgd_and_beats_rdp():
    engine, model, opt, loader = _setup()
    model, opt, loader = _private(engine, model, opt, loader, 1.1)
    steps = _train(model, opt, loader, epochs=8)
    q = 1 / len(loader)
    assert 100 <= steps <= 300
    assert engine.accountant.history == [(1.1, q, steps)]
    assert len(engine.accountant) == 1
    eps = engine.get_epsilon(DELTA)
    ours = tightdp.dpsgd_epsilon(sampling_rate=q, noise_multiplier=1.1, steps=steps, delta=DELTA)
    assert isinstance(eps, float) and eps == ours.epsilon
    r = engine.accountant.get_epsilon_result(DELTA)
    assert r.certified and r.lower <= eps == r.upper
    rdp = RDPAccountant()
    rdp.history = list(engine.accountant.history)
    assert eps <= rdp.get_epsilon(DELTA)
    # independent: dp_accounting's optimistic estimate is below our upper bound and its
    # pessimistic one above our lower bound
    run = [(1.1, q, steps)]
    if not HAVE_DPACC:
        return
    assert r.lower <= _dpacc_schedule(run, optimistic=False)
    assert _dpacc_schedule(run, optimistic=True) <= r.upper


def test_make_private_with_epsilon_meets_target():
    engine, model, opt, loader = _setup(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = engine.make_private_with_epsilon(
            module=model, optimizer=opt, data_loader=loader, target_epsilon=2.0,
            target_delta=DELTA, epochs=5, max_grad_norm=1.0)
    steps = _train(model, opt, loader, epochs=5)
    q = 1 / len(loader)
    assert engine.accountant.history == [(opt.noise_multiplier, q, steps)]
    eps = engine.get_epsilon(DELTA)
    assert eps == tightdp.dpsgd_epsilon(
        sampling_rate=q, noise_multiplier=opt.noise_multiplier, steps=steps, delta=DELTA).epsilon
    assert eps <= 2.0
    # Opacus' search stops within its epsilon_tolerance 0.01 of the target
    assert eps >= 2.0 - 0.011


def test_noise_schedule_is_composed_exactly():
    engine, model, opt, loader = _setup(2)
    model, opt, loader = _private(engine, model, opt, loader, 0.9)

    def schedule(step):
        if step == 60:
            opt.noise_multiplier = 1.6

    steps = _train(model, opt, loader, epochs=6, on_step=schedule)
    q = 1 / len(loader)
    assert engine.accountant.history == [(0.9, q, 60), (1.6, q, steps - 60)]
    r = engine.accountant.get_epsilon_result(DELTA)
    hand = (tightdp.PLDAccountant(1e-3)
            .compose(tightdp.PoissonSubsampled(tightdp.Gaussian(0.9), q), 60)
            .compose(tightdp.PoissonSubsampled(tightdp.Gaussian(1.6), q), steps - 60)
            .epsilon(DELTA))
    assert (r.lower, r.upper) == (hand.lower, hand.upper)
    assert engine.get_epsilon(DELTA) == hand.epsilon
    # not averaged: strictly between the all-0.9 and the all-1.6 runs
    hi = tightdp.dpsgd_epsilon(sampling_rate=q, noise_multiplier=0.9, steps=steps, delta=DELTA)
    lo = tightdp.dpsgd_epsilon(sampling_rate=q, noise_multiplier=1.6, steps=steps, delta=DELTA)
    assert lo.upper < r.lower and r.upper < hi.lower
    runs = [(0.9, q, 60), (1.6, q, steps - 60)]
    if not HAVE_DPACC:
        return
    assert r.lower <= _dpacc_schedule(runs, optimistic=False)
    assert _dpacc_schedule(runs, optimistic=True) <= r.upper


def test_checkpoint_round_trip_mid_training(tmp_path):
    # uninterrupted reference run of 2 + 2 epochs
    engine, model, opt, loader = _setup(3)
    model, opt, loader = _private(engine, model, opt, loader, 1.0)
    n1 = _train(model, opt, loader, epochs=2)
    mid_eps = engine.get_epsilon(DELTA)
    path = tmp_path / "ckpt.pt"
    engine.save_checkpoint(path=path, module=model, optimizer=opt)
    n2 = _train(model, opt, loader, epochs=2)
    full_eps = engine.get_epsilon(DELTA)
    assert full_eps > mid_eps

    # resume in a fresh engine from the checkpoint and run the remaining 2 epochs
    engine2, model2, opt2, loader2 = _setup(3)
    model2, opt2, loader2 = _private(engine2, model2, opt2, loader2, 1.0)
    engine2.load_checkpoint(path=path, module=model2, optimizer=opt2)
    assert isinstance(engine2.accountant, TightAccountant)
    assert engine2.get_epsilon(DELTA) == mid_eps
    assert _train(model2, opt2, loader2, epochs=2) == n2
    assert engine2.accountant.history == engine.accountant.history
    assert engine2.get_epsilon(DELTA) == full_eps
    assert engine.accountant.history[0][2] == n1 + n2


def test_opacus_rdp_state_converts_explicitly():
    rdp = RDPAccountant()
    for sigma, n in [(1.0, 30), (1.3, 50)]:
        for _ in range(n):
            rdp.step(noise_multiplier=sigma, sample_rate=0.02)
    state = copy.deepcopy(rdp.state_dict())
    ours = TightAccountant()
    with pytest.raises(ValueError, match="convert_state_dict"):
        ours.load_state_dict(state)
    ours.load_state_dict(convert_state_dict(state))
    assert ours.history == rdp.history
    hand = (tightdp.PLDAccountant(1e-3)
            .compose(tightdp.PoissonSubsampled(tightdp.Gaussian(1.0), 0.02), 30)
            .compose(tightdp.PoissonSubsampled(tightdp.Gaussian(1.3), 0.02), 50)
            .epsilon(DELTA))
    assert ours.get_epsilon(DELTA) == hand.epsilon <= rdp.get_epsilon(DELTA)
    # state_dict of ours round-trips
    again = TightAccountant()
    again.load_state_dict(copy.deepcopy(ours.state_dict()))
    assert again.history == ours.history and again.get_epsilon(DELTA) == hand.epsilon


def test_rdp_checkpoint_file_resumes_under_tightdp(tmp_path):
    engine, model, opt, loader = _setup(4, accountant="rdp")
    model, opt, loader = _private(engine, model, opt, loader, 1.2)
    steps = _train(model, opt, loader, epochs=2)
    path = tmp_path / "rdp.pt"
    engine.save_checkpoint(path=path, module=model, optimizer=opt)
    q = 1 / len(loader)

    engine2, model2, opt2, loader2 = _setup(4)
    model2, opt2, loader2 = _private(engine2, model2, opt2, loader2, 1.2)
    with pytest.raises(ValueError, match="convert_state_dict"):
        engine2.load_checkpoint(path=path, module=model2, optimizer=opt2)
    state = torch.load(path, weights_only=False)["privacy_accountant_state_dict"]
    engine2.accountant.load_state_dict(convert_state_dict(state))
    assert engine2.accountant.history == [(1.2, q, steps)]
    eps = engine2.get_epsilon(DELTA)
    assert eps == tightdp.dpsgd_epsilon(
        sampling_rate=q, noise_multiplier=1.2, steps=steps, delta=DELTA).epsilon
    assert eps <= engine.get_epsilon(DELTA)  # Opacus' RDP bound for the same steps


@pytest.mark.parametrize("state, field", [
    ({"history": [(-1.0, 0.1, 5)], "mechanism": "rdp"}, "noise_multiplier"),
    ({"history": [(1.0, 2.0, 5)], "mechanism": "prv"}, "sample_rate"),
    ({"history": [(1.0, 0.1, 0)], "mechanism": "rdp"}, "num_steps"),
    ({"history": [(1.0, 0.1, 2.5)], "mechanism": "rdp"}, "num_steps"),
    ({"history": [(1.0, 0.1)], "mechanism": "rdp"}, "triple"),
    ({"history": "nonsense", "mechanism": "rdp"}, "history"),
    ({"history": [], "mechanism": "foo"}, "mechanism"),
    ({"mechanism": "rdp"}, "history"),
])
def test_malformed_states_are_refused(state, field):
    with pytest.raises(ValueError, match=field):
        convert_state_dict(state)
    if state.get("mechanism") == "rdp" and "history" in state:
        fixed = {**state, "mechanism": "tightdp"}
        with pytest.raises(ValueError, match=field):
            TightAccountant().load_state_dict(fixed)


def test_numpy_history_entries_are_accepted():
    np = pytest.importorskip("numpy")
    state = {"history": [(np.float64(1.0), np.float32(0.25), np.int64(40))],
             "mechanism": "prv"}
    acc = TightAccountant()
    acc.load_state_dict(convert_state_dict(state))
    assert acc.history == [(1.0, 0.25, 40)]
    assert acc.get_epsilon(DELTA) == tightdp.dpsgd_epsilon(
        sampling_rate=0.25, noise_multiplier=1.0, steps=40, delta=DELTA).epsilon


def test_step_and_query_validation():
    acc = TightAccountant()
    assert acc.get_epsilon(DELTA) == 0.0
    with pytest.raises(ValueError, match="noise_multiplier"):
        acc.step(noise_multiplier=float("nan"), sample_rate=0.1)
    with pytest.raises(ValueError, match="sample_rate"):
        acc.step(noise_multiplier=1.0, sample_rate=0.0)
    with pytest.raises(ValueError, match="delta"):
        acc.get_epsilon(1.5)
    with pytest.raises(ValueError, match="rtol"):
        TightAccountant(rtol=-1)
    acc.step(noise_multiplier=0.0, sample_rate=0.1)
    assert acc.get_epsilon(DELTA) == float("inf")


def test_get_noise_multiplier_meets_target_and_is_tight():
    target, q, steps = 2.0, 0.01, 300
    sigma = get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=q,
                                 steps=steps)
    assert sigma == get_noise_multiplier(target_epsilon=target, target_delta=DELTA,
                                         sample_rate=q, epochs=3)
    acc = TightAccountant()
    acc.history = [(sigma, q, steps)]
    assert acc.get_epsilon(DELTA) <= target
    # dp_accounting's PLD at a fine grid: the pessimistic estimate meets the target at sigma;
    # at 0.995 sigma even its optimistic estimate (and our certified lower bound) misses it,
    # so sigma is within 0.5% of the smallest sigma that meets the target
    if HAVE_DPACC:
        assert _dpacc_schedule([(sigma, q, steps)], optimistic=False, grid=1e-5) <= target
        assert _dpacc_schedule([(0.995 * sigma, q, steps)], optimistic=True,
                               grid=1e-5) > target
    assert tightdp.dpsgd_epsilon(
        sampling_rate=q, noise_multiplier=0.995 * sigma, steps=steps, delta=DELTA).lower > target
    # Opacus' own search through the registry, with our accountant, is certified too and
    # (with its epsilon_tolerance) no tighter than ours
    theirs = opacus_noise(target_epsilon=target, target_delta=DELTA, sample_rate=q,
                          steps=steps, accountant="tightdp")
    acc.history = [(theirs, q, steps)]
    assert acc.get_epsilon(DELTA) <= target
    assert sigma <= theirs * 1.001
    with pytest.raises(ValueError, match="epochs or steps"):
        get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=q)


def test_readme_section_runs(capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## For Opacus users\n.*?```python\n(.*?)```", text, re.S)
    assert block, "README has no Opacus section"
    exec(compile(block.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out.split()
    assert len(out) >= 2


# ---- which sampler ran: the data loader tells the accountant ---------------------------



def _subsets_drawn(n: int, t: int, k: int, epochs: int, seed: int) -> list[list[tuple]]:
    """For each epoch, the k-subset of steps each index was placed in (checking that every
    index appears exactly k times, in distinct batches)."""
    s = RandomAllocationSampler(n, t, selected=k, generator=torch.Generator().manual_seed(seed))
    assert len(s) == t
    out = []
    for _ in range(epochs):
        where: dict = {i: [] for i in range(n)}
        batches = list(s)
        assert len(batches) == t
        for step, batch in enumerate(batches):
            for i in batch:
                where[i].append(step)
        assert all(len(where[i]) == k == len(set(where[i])) for i in range(n))
        out.append([tuple(sorted(where[i])) for i in range(n)])
    assert s.epochs == epochs
    return out


@pytest.mark.parametrize("n, t, k", [(5, 4, 2), (4, 6, 1)])
def test_random_allocation_sampler_law(n, t, k):
    """Each index joins exactly k batches per epoch, its k-subset uniform over the C(t, k)
    subsets (chi-square per index, 3000 seeded epochs) and independent of another index's
    (chi-square on the joint table of indices 0 and 1)."""
    draws = _subsets_drawn(n, t, k, 3000, seed=k)
    subsets = list(combinations(range(t), k))
    for i in range(n):
        counts = [sum(d[i] == c for d in draws) for c in subsets]
        assert chisquare(counts).pvalue > 1e-4, (i, counts)
    joint = [sum(d[0] == a and d[1] == b for d in draws) for a in subsets for b in subsets]
    assert chisquare(joint).pvalue > 1e-4


def test_random_allocation_sampler_refuses_bad_input():
    with pytest.raises(ValueError, match=r"^selected must be in \[1, steps=3\]"):
        RandomAllocationSampler(10, 3, selected=4)
    for bad in (dict(dataset_size=0, steps=3), dict(dataset_size=5, steps=0),
                dict(dataset_size=5, steps=3, selected=0)):
        with pytest.raises(ValueError, match=r"^(dataset_size|steps|selected) must be"):
            RandomAllocationSampler(**bad)


def _data(n: int = N_DATA):
    torch.manual_seed(0)
    x = torch.randn(n, 5)
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())


def test_attach_tells_the_samplers_apart():
    acc = TightAccountant()
    with pytest.warns(UserWarning, match="understate"):
        assert acc.attach(torch.utils.data.DataLoader(_data(), batch_size=10,
                                                      shuffle=True)) == "shuffle"
    assert acc.scheme == {"sampling": "shuffle", "steps_per_epoch": 20, "batch_size": 10,
                          "dataset_size": N_DATA}
    with pytest.warns(UserWarning):  # drop_last: 19 whole batches of a random subset
        acc.attach(torch.utils.data.DataLoader(_data(199), batch_size=10, shuffle=True,
                                               drop_last=True))
    assert acc.scheme["steps_per_epoch"] == 19
    with pytest.raises(ValueError, match=r"^data_loader: .*partial batch of 9.*drop_last=True"):
        acc.attach(torch.utils.data.DataLoader(_data(199), batch_size=10, shuffle=True))
    ra = torch.utils.data.DataLoader(_data(), batch_sampler=RandomAllocationSampler(N_DATA, 20))
    assert acc.attach(ra) == "random_allocation"
    assert acc.scheme == {"sampling": "random_allocation", "steps_per_epoch": 20, "selected": 1}
    from opacus.data_loader import DPDataLoader
    poisson = DPDataLoader.from_data_loader(torch.utils.data.DataLoader(_data(), batch_size=10))
    assert acc.attach(poisson) == "poisson"
    with pytest.warns(UserWarning, match="cannot tell"):
        assert acc.attach(torch.utils.data.DataLoader(_data(), batch_size=10)) == "poisson"


def _gaussian_epochs_eps(epochs: int, sigma: float) -> float:
    """eps at DELTA of `epochs` Gaussian mechanisms of noise sigma, sensitivity 1: mu-GDP
    with mu = sqrt(epochs) / sigma (Dong, Roth & Su 2022, Cor. 2.13), by bisection. Each
    example is in one batch per epoch of shuffling or random allocation (selected=1), so
    this bounds both from above (no amplification)."""
    return float(oracle.gaussian_epsilon(sigma, epochs, DELTA))


def _train_with(loader, sigma: float, epochs: int):
    torch.manual_seed(3)
    model = torch.nn.Linear(5, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = PrivacyEngine(accountant="tightdp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=sigma,
            max_grad_norm=1.0, poisson_sampling=False)
    steps = _train(model, opt, loader, epochs=epochs)
    return engine, (model, opt, loader), steps


def test_opacus_run_with_random_allocation_sampler():
    """2 epochs of make_private(poisson_sampling=False) on RandomAllocationSampler: the
    accountant reports random allocation, the front door's number for that setting, below
    the closed form of one Gaussian per epoch."""
    if not hasattr(tightdp, "RandomAllocation"):
        pytest.skip("tightdp.RandomAllocation is not on this branch")
    loader = torch.utils.data.DataLoader(
        _data(), batch_sampler=RandomAllocationSampler(
            N_DATA, 20, generator=torch.Generator().manual_seed(0)))
    engine, _, steps = _train_with(loader, 1.0, epochs=2)
    assert steps == 40 and engine.accountant.scheme["sampling"] == "random_allocation"
    r = engine.accountant.get_epsilon_result(DELTA)
    assert r.details["sampling"] == "random_allocation" and r.details["epochs"] == 2
    ours = tightdp.dpsgd_epsilon(sampling="random_allocation", steps_per_epoch=20, epochs=2,
                                 noise_multiplier=1.0, delta=DELTA)
    assert engine.get_epsilon(DELTA) == ours.epsilon == r.upper
    assert r.lower <= r.upper <= _gaussian_epochs_eps(2, 1.0)


def test_opacus_shuffled_run_is_accounted_as_shuffling():
    """A shuffled loader: warned, accounted as epochs of shuffling under replace_special;
    a pass broken off early still counts as an epoch (the loader counts its passes)."""
    if not hasattr(tightdp, "Shuffled"):
        pytest.skip("tightdp.Shuffled is not on this branch")
    loader = torch.utils.data.DataLoader(_data(), batch_size=10, shuffle=True)
    engine, (model, opt, loader), steps = _train_with(loader, 1.0, epochs=1)
    assert steps == 20 and engine.accountant.scheme["sampling"] == "shuffle"
    r = engine.accountant.get_epsilon_result(DELTA)
    assert r.details["neighboring"] == "replace_special" and r.details["epochs"] == 1
    assert "replace_special" in r.note
    # Shuffled's certified side is no amplification: one Gaussian per epoch, exactly
    exact = _gaussian_epochs_eps(1, 1.0)
    assert r.lower <= r.upper and exact <= r.upper <= exact * (1 + 1e-3)
    ours = tightdp.dpsgd_epsilon(sampling="shuffle", steps_per_epoch=20, epochs=1,
                                 noise_multiplier=1.0, delta=DELTA)
    assert r.upper == ours.epsilon
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(2):  # two passes of 5 steps: 30 steps in all, but 3 permutations drawn
        for i, (xb, yb) in enumerate(loader):
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
            if i == 4:
                break
    assert engine.accountant.get_epsilon_result(DELTA).details["epochs"] == 3


def test_state_dict_keeps_the_sampling():
    """A checkpoint of an accountant attached to a random-allocation loader resumes with
    the same scheme and the epochs started; a malformed sampling is refused naming it."""
    acc = TightAccountant()
    sampler = RandomAllocationSampler(N_DATA, 20, selected=2)
    acc.attach(torch.utils.data.DataLoader(_data(), batch_sampler=sampler))
    list(sampler)
    list(sampler)
    state = acc.state_dict()
    assert state["sampling"] == {"sampling": "random_allocation", "steps_per_epoch": 20,
                                 "selected": 2} and state["epochs_started"] == 2
    again = TightAccountant()
    again.load_state_dict(state)
    assert again.scheme == acc.scheme and again.epochs_started == 2
    with pytest.raises(ValueError, match=r"^state_dict sampling: selected must be in"):
        again.load_state_dict({**state, "sampling": {"sampling": "random_allocation",
                                                     "steps_per_epoch": 2, "selected": 3}})


def test_get_tpr_and_advantage_match_dpsgd_risk():

    acc = TightAccountant()
    for _ in range(300):
        acc.step(noise_multiplier=1.0, sample_rate=0.02)
    r = tightdp.dpsgd_risk(sampling_rate=0.02, noise_multiplier=1.0, steps=300,
                           fpr=[0.001, 0.01])
    assert acc.get_tpr(0.01) == pytest.approx(r.tpr_upper[1], rel=1e-12)
    assert np.allclose(acc.get_tpr([0.001, 0.01]), r.tpr_upper, rtol=1e-12)
    default = tightdp.dpsgd_risk(sampling_rate=0.02, noise_multiplier=1.0, steps=300)
    assert acc.get_advantage() == pytest.approx(default.advantage_upper, rel=1e-12)
    with pytest.raises(ValueError, match=r"^fpr must be in \[0, 1\]"):
        acc.get_tpr(2.0)
