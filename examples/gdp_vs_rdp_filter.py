"""GDP filter vs RDP filter for DP gradient descent (Koskela, Tobaben, Honkela, App. C.4).

Every step of DP-GD with noise multiplier ``sigma`` is ``1/sigma``-GDP (worst case, every
gradient clipped). A filter with the budget of a target ``(eps, delta)`` admits steps until the
budget is spent; this script counts how many steps each filter admits:

* GDP filter (Thm. 2): budget ``mu`` with the exact mu-GDP curve giving ``(eps, delta)``;
* RDP filter (Feldman & Zrnic 2021) at the order best for Gaussian steps, with the budget whose
  conversion (C.3) gives ``(eps, delta)``.

Run: ``python examples/gdp_vs_rdp_filter.py``
"""

from __future__ import annotations

from tightdp import GDPFilter, RDPFilter, gdp_mu


def admitted(flt, mu_t: float, limit: int = 10_000_000) -> int:
    """Number of requests of ``mu_t`` the filter admits before the first rejection."""
    n = 0
    while n < limit and flt.request(mu_t):
        n += 1
    return n


def main() -> None:
    delta = 1e-5
    print(f"DP-GD, delta = {delta:g}: iterations admitted for the same (eps, delta)")
    print(f"{'sigma':>6} {'eps':>4} {'GDP filter':>11} {'RDP filter':>11} {'ratio':>6} "
          f"{'RDP order':>9}")
    for sigma in (10, 50, 100):
        for eps in (1.0, 3.0, 8.0):
            g = GDPFilter(gdp_mu(eps, delta))
            r = RDPFilter.from_epsilon_delta(eps, delta)
            n_g = admitted(g, 1.0 / sigma)
            n_r = admitted(r, 1.0 / sigma)
            # both filters' guarantees must be within the target
            assert g.epsilon(delta).epsilon <= eps * (1 + 1e-9)
            assert r.epsilon(delta).epsilon <= eps * (1 + 1e-9)
            print(f"{sigma:>6} {eps:>4g} {n_g:>11d} {n_r:>11d} {n_g / n_r:>6.3f} "
                  f"{r.order:>9.2f}")


if __name__ == "__main__":
    main()
