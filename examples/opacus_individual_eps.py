"""Individual eps of every training example of an Opacus DP-SGD run (Koskela, Tobaben,
Honkela, Sec. 5 and App. D).

Trains a small MLP on scikit-learn's digits with Opacus (Poisson sampling, clipping norm C,
noise multiplier sigma). After every optimizer step the per-example gradient norms of *all*
training examples at the current model are computed (``torch.func``) and recorded in
:class:`tightdp.individual.IndividualPLDAccountant`; at the end every example's eps is computed
and a histogram is saved beside the worst-case eps (``opacus_individual_eps.png``).

What the numbers are: the worst-case eps is the certified guarantee of the run (every example
charged the clipping norm at every step). The individual eps of an example is a certified
upper bound on the eps of the composition of its own per-step mechanisms *given its recorded
norms* -- the paper's approximative individual accountant, not a fully adaptive guarantee
(for that see the individual GDP filter, ``examples/filtered_dpgd.py``).

Needs: ``pip install torch opacus scikit-learn matplotlib``.
Run: ``python examples/opacus_individual_eps.py``
"""

from __future__ import annotations

import warnings

import numpy as np

from tightdp import Gaussian, IndividualPLDAccountant, PLDAccountant, PoissonSubsampled


def main(epochs: int = 8, batch_size: int = 64, sigma: float = 1.0, clip: float = 1.0,
         delta: float = 1e-5) -> None:
    import torch
    import torch.nn.functional as F
    from opacus import PrivacyEngine
    from sklearn.datasets import load_digits
    from torch.func import functional_call, grad, vmap

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    x, y = load_digits(return_X_y=True)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(x))
    tr, te = perm[:1400], perm[1400:]
    xt, yt = torch.tensor(x[tr], dtype=torch.float32), torch.tensor(y[tr])
    xe, ye = torch.tensor(x[te], dtype=torch.float32), torch.tensor(y[te])
    n = len(tr)

    def mlp():
        return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                   torch.nn.Linear(32, 10))

    model = mlp()
    shadow = mlp()  # hook-free copy of the architecture for the per-example norms
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt),
                                         batch_size=batch_size)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                             noise_multiplier=sigma, max_grad_norm=clip,
                                             poisson_sampling=True)
    q = 1.0 / len(loader)
    base = model._module

    def loss_one(params, xi, yi):
        out = functional_call(shadow, params, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_example_grads = vmap(grad(loss_one), in_dims=(None, 0, 0))
    ind = IndividualPLDAccountant(sampling_rate=q, noise_multiplier=sigma, clip_norm=clip,
                                  n_examples=n)
    steps = 0
    for _ in range(epochs):
        for xb, yb in loader:
            if len(xb) == 0:
                continue
            # norms of every example's gradient at the model of this step
            params = {k: p.detach() for k, p in base.named_parameters()}
            with torch.no_grad():
                g = per_example_grads(params, xt, yt)
                sq = sum(t.flatten(1).pow(2).sum(1) for t in g.values())
            ind.step(sq.sqrt().numpy())
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            steps += 1

    with torch.no_grad():
        acc = (model(xe).argmax(1) == ye).float().mean().item()
    eps_i = ind.epsilon(delta).epsilon
    worst = PLDAccountant().compose(PoissonSubsampled(Gaussian(sigma), q), steps).epsilon(delta)
    print(f"{steps} steps, q = {q:.4f}, sigma = {sigma}, C = {clip}; test accuracy {acc:.3f}")
    print(f"worst-case eps (certified, tightdp): {worst.upper:.4f}; "
          f"Opacus RDP accountant: {engine.get_epsilon(delta):.4f}")
    pct = np.percentile(eps_i, [0, 10, 50, 90, 100])
    print("individual eps percentiles 0/10/50/90/100: " + " ".join(f"{v:.3f}" for v in pct))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(eps_i, bins=50)
    ax.axvline(worst.upper, color="k", ls="--", label="worst case")
    ax.set_xlabel(f"individual eps at delta={delta:g}")
    ax.set_ylabel("training examples")
    ax.legend()
    fig.tight_layout()
    fig.savefig("opacus_individual_eps.png", dpi=120)
    print("saved opacus_individual_eps.png")


if __name__ == "__main__":
    main()
