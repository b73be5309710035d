// Command epochfs-sim runs the sampler simulator (package test/sim): Seneca's
// Figure 13, Joader's Table 1, or one configuration given by flags, and
// prints Markdown tables.
//
//	go run ./test/sim/cmd/epochfs-sim -experiment fig13
//	go run ./test/sim/cmd/epochfs-sim -experiment fig13 -speeds 3000,1500,1000
//	go run ./test/sim/cmd/epochfs-sim -experiment joader
//	go run ./test/sim/cmd/epochfs-sim -policy ods -jobs 3 -resident 0.2 -buffer 200
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/epochfs/epochfs/test/sim"
)

func main() {
	exp := flag.String("experiment", "", "fig13, joader, or empty for one run")
	samples := flag.Int("samples", 20000, "dataset size")
	speeds := flag.String("speeds", "1000,1000,1000", "jobs' samples/s, comma-separated")
	jobs := flag.Int("jobs", 0, "number of jobs (one run; overrides -speeds count, speed 1000)")
	policy := flag.String("policy", "ods", "ods, random, minio or lru (one run)")
	resident := flag.Float64("resident", 0.2, "resident fraction (one run)")
	buffer := flag.Int("buffer", 200, "buffer slots (one run)")
	bufferPct := flag.Float64("buffer-pct", 1, "buffer, % of the dataset (fig13)")
	source := flag.Float64("source", 3000, "source samples/s, 0 = unlimited")
	epochs := flag.Int("epochs", 4, "epochs per job")
	batch := flag.Int("batch", 64, "batch size")
	lookahead := flag.Int("lookahead", 2, "batches drawn ahead per job")
	seed := flag.Uint64("seed", 1, "seed")
	flag.Parse()

	var sp []float64
	for _, f := range strings.Split(*speeds, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "epochfs-sim: -speeds: bad value %q\n", f)
			os.Exit(2)
		}
		sp = append(sp, v)
	}
	switch *exp {
	case "fig13":
		rows, err := sim.Fig13(sim.Fig13Options{Samples: *samples, BufferPct: *bufferPct, Speeds: sp,
			SourceRate: *source, Epochs: *epochs, Seed: *seed, BatchSize: *batch, Lookahead: *lookahead})
		if err != nil {
			fmt.Fprintln(os.Stderr, "epochfs-sim:", err)
			os.Exit(1)
		}
		sim.WriteFig13(os.Stdout, rows)
	case "joader":
		rows, err := sim.Joader(*seed, []float64{0, 0.1, 0.25, 0.5, 0.75, 1})
		if err != nil {
			fmt.Fprintln(os.Stderr, "epochfs-sim:", err)
			os.Exit(1)
		}
		sim.WriteJoader(os.Stdout, rows)
	case "":
		js := make([]sim.Job, 0, len(sp))
		if *jobs > 0 {
			for range *jobs {
				js = append(js, sim.Job{Speed: 1000})
			}
		} else {
			for _, v := range sp {
				js = append(js, sim.Job{Speed: v})
			}
		}
		r, err := sim.Run(sim.Config{Samples: *samples, Jobs: js, Policy: sim.Policy(*policy), ResidentFraction: *resident,
			BufferSlots: *buffer, SourceRate: *source, Epochs: *epochs, BatchSize: *batch, Lookahead: *lookahead, Seed: *seed})
		if err != nil {
			fmt.Fprintln(os.Stderr, "epochfs-sim:", err)
			os.Exit(1)
		}
		fmt.Printf("reads=%d\nsource_fetches=%d\nprefetches=%d\nhit_rate=%.4f\nfetches_per_epoch=%.0f\nnon_resident=%d\nfetches_per_epoch_over_non_resident=%.3f\nmakespan_s=%.2f\n",
			r.Reads, r.SourceFetches, r.Prefetches, r.HitRate, r.FetchesPerEpoch, r.NonResident, r.FetchesPerEpoch/float64(r.NonResident), r.Makespan)
		for i, j := range r.Jobs {
			fmt.Printf("job%d.reads=%d\njob%d.epochs=%d\njob%d.coverage=%.4f\njob%d.exact=%v\njob%d.wait_s=%.2f\njob%d.finish_s=%.2f\n",
				i, j.Reads, i, j.Epochs, i, j.Coverage, i, j.Exact, i, j.Wait, i, j.Finish)
		}
		fmt.Printf("buffer.substituted=%d\nbuffer.released=%d\nbuffer.evicted=%d\nbuffer.kept=%d\n",
			r.Buffer.Substituted, r.Buffer.Released, r.Buffer.Evicted, r.Buffer.Kept)
	default:
		fmt.Fprintf(os.Stderr, "epochfs-sim: -experiment: want fig13 or joader, got %q\n", *exp)
		os.Exit(2)
	}
}
