"""The model benchmark's summary (test/bench/model/run.sh): each configuration's prediction and
median measurement (with the spread over repetitions), the Pearson correlation over all of them, and
for each dataset size and job count whether the model's split measures within 5 % of the best."""
import json
import statistics
import sys
from collections import defaultdict


def pearson(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5


def main(path):
    runs = defaultdict(list)
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        runs[(r["n"], r["k"], r["split"])].append(r)
    rows = []
    print(f"{'files':>6} {'jobs':>4} {'split':>9} {'as run':>17} {'predicted':>10} {'measured (min-max)':>24} {'pred/meas':>9}  bound")
    for (n, k, split), rs in sorted(runs.items()):
        meas = sorted(r["measured"] for r in rs)
        pred = statistics.median(r["predicted"] for r in rs)
        med = statistics.median(meas)
        rows.append({"n": n, "k": k, "split": split, "chosen": rs[0]["chosen"], "pred": pred, "meas": med})
        print(f"{n:>6} {k:>4} {split:>9} {rs[0]['chosen']:>17} {pred:>10.0f} {med:>10.0f} ({meas[0]:.0f}-{meas[-1]:.0f}) {pred / med:>9.2f}  {rs[0]['bound']}")
    r = pearson([x["pred"] for x in rows], [x["meas"] for x in rows])
    print(f"\nPearson correlation of predicted and measured samples/s over {len(rows)} configurations: {r:.3f}")
    groups = defaultdict(list)
    for x in rows:
        groups[(x["n"], x["k"])].append(x)
    ok = True
    for (n, k), xs in sorted(groups.items()):
        best = max(xs, key=lambda x: x["meas"])
        mdp = [x for x in xs if x["split"] == "mdp"]
        if not mdp:
            continue
        ratio = mdp[0]["meas"] / best["meas"]
        within = ratio >= 0.95
        ok = ok and within
        print(f"{n} files, {k} job(s): the model's split {mdp[0]['chosen']} measures {mdp[0]['meas']:.0f} samples/s, "
              f"{ratio:.3f} of the best measured ({best['split']} as {best['chosen']}: {best['meas']:.0f}): "
              f"{'within' if within else 'NOT within'} 5 %")
    print(f"\nPearson >= 0.95: {'met' if r >= 0.95 else 'NOT met'}; the model's split within 5 % of the best everywhere: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main(sys.argv[1])
