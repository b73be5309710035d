package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/testenv"
	"github.com/epochfs/epochfs/test/faultfs"
)

// make chaos SEED=N DURATION=2m: go test ./test/chaos -run TestChaos
// -chaos.seed=N -chaos.duration=2m. A run draws steps from the seed until
// the duration (or -chaos.ops) is spent, each checked against the model;
// on a divergence, a hang past a deadline or a lost resident copy it
// prints the seed, the steps before it and a shorter sequence that still
// fails, found by replaying (-chaos.minimize bounds that search).
var (
	// The seed is fixed unless given, so that go test ./... (the race
	// run of make ci) repeats itself; make chaos without SEED draws one.
	seedFlag     = flag.Uint64("chaos.seed", 1, "the run's seed (0: a random one, printed first)")
	durationFlag = flag.Duration("chaos.duration", 30*time.Second, "how long to run")
	opsFlag      = flag.Int("chaos.ops", 0, "stop after this many steps (0: the duration only)")
	validateFlag = flag.String("chaos.validate", "", "once, open or never (default: by the seed)")
	minimizeFlag = flag.Duration("chaos.minimize", 3*time.Minute, "how long to look for a shorter failing sequence")
)

var binPath string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "epochfs-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "epochfs")
	if out, err := exec.Command("go", "build", "-o", binPath, "github.com/epochfs/epochfs/cmd/epochfs").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build epochfs: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	faultfs.RemoveBinary()
	os.Exit(code)
}

func requireRoot(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.Skip(t, "no /dev/fuse: %v", err)
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, "the chaos harness mounts: it needs root")
	}
}

// TestChaos is one budget of random steps.
func TestChaos(t *testing.T) {
	requireRoot(t)
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	validate := *validateFlag
	if validate == "" {
		validate = []string{"once", "open", "never"}[seed%3]
	}
	t.Logf("chaos: seed %d, validate %q, budget %v (rerun: make chaos SEED=%d)", seed, validate, *durationFlag, seed)
	r := newRunner(t, seed, validate)
	defer r.close()
	start := time.Now()
	var failure error
	for time.Since(start) < *durationFlag && (*opsFlag == 0 || r.step < *opsFlag) {
		r.step++
		o := r.gen()
		r.ops = append(r.ops, o)
		if failure = r.do(o); failure != nil {
			break
		}
	}
	if failure == nil {
		r.fault(op{Kind: "heal"})
		failure = r.finalCheck()
	}
	took := time.Since(start)
	t.Logf("chaos: %d steps in %v (%.0f/s), by kind: %v", r.step, took.Round(time.Second), float64(r.step)/took.Seconds(), r.counts)
	if failure == nil {
		t.Logf("chaos: seed %d: no divergence, no hang past a deadline, no lost copy", seed)
		return
	}
	hung := r.hangedOp != ""
	if !hung {
		if st := r.status(); st != nil {
			t.Logf("status at the failure: files_total=%s catalog=%s source_state=%s source_stuck=%s files_removed=%s",
				st["files_total"], st["catalog"], st["source_state"], st["source_stuck"], st["files_removed"])
		}
	}
	logTail := r.daemonLog(40)
	r.close()
	t.Errorf("chaos: seed %d, validate %q: step %d (%s): %v", seed, validate, r.step, r.ops[len(r.ops)-1], failure)
	t.Logf("the daemon's last warnings and errors (epochfs.log):\n%s", logTail)
	t.Logf("the last steps:\n%s", lastSteps(r.ops, 30))
	if dump := filepath.Join(os.TempDir(), fmt.Sprintf("epochfs-chaos-%d.steps", seed)); os.WriteFile(dump, []byte(lastSteps(r.ops, len(r.ops))), 0o644) == nil {
		t.Logf("every step: %s", dump)
	}
	if hung {
		t.Log("a step hung: not minimising (a replay could hang as well)")
		return
	}
	want := signature(failure)
	fails := func(ops []op) bool {
		err := replay(t, seed, validate, ops)
		return err != nil && signature(err) == want
	}
	if min := minimize(r.ops, *minimizeFlag, fails); min != nil {
		t.Logf("a shorter sequence that fails (%d steps):\n%s", len(min), lastSteps(min, len(min)))
	}
}

// finalCheck: with the source well again and a refresh done, every file
// reads as the source has it now.
func (r *runner) finalCheck() error {
	time.Sleep(r.m.grace)
	if err := r.refresh(); err != nil {
		return fmt.Errorf("final: %w", err)
	}
	for _, p := range r.m.present() {
		data, err := readWhole(filepath.Join(r.mnt, p))
		f := r.m.files[p]
		cur := f.versions[len(f.versions)-1].data
		if err != nil || string(data) != string(cur) {
			return fmt.Errorf("final: %s: %v, %d bytes, want the current %d", p, err, len(data), len(cur))
		}
	}
	return nil
}

func lastSteps(ops []op, n int) string {
	var b strings.Builder
	from := max(0, len(ops)-n)
	for i := from; i < len(ops); i++ {
		fmt.Fprintf(&b, "  %4d %s\n", i+1, ops[i])
	}
	return b.String()
}

// replay runs ops on a fresh run and returns its failure, if any.
func replay(t testing.TB, seed uint64, validate string, ops []op) error {
	r := newRunner(t, seed, validate)
	defer r.close()
	for _, o := range ops {
		r.step++
		if err := r.do(o); err != nil {
			return err
		}
	}
	r.fault(op{Kind: "heal"})
	return r.finalCheck()
}

// signature is a failure without its numbers and paths: a shorter
// sequence must fail the same way, not any way.
func signature(err error) string {
	return sigStrip.ReplaceAllString(err.Error(), "#")
}

var sigStrip = regexp.MustCompile(`[0-9a-f]{6,}…?|[0-9]+|/[^ :"]*|[a-z0-9]+/[^ :"]*`)

// minimize looks for a shorter sequence that still fails (fails replays
// one): it removes chunks of the steps, halving their size (delta
// debugging), keeping the failing step last, within the time given. nil
// when none was found.
func minimize(ops []op, budget time.Duration, fails func([]op) bool) []op {
	deadline := time.Now().Add(budget)
	cur := ops
	found := false
	for chunk := len(cur) / 2; chunk >= 1 && time.Now().Before(deadline); chunk /= 2 {
		for i := 0; i+chunk <= len(cur) && time.Now().Before(deadline); {
			try := append(append([]op(nil), cur[:i]...), cur[i+chunk:]...)
			if len(try) > 0 && try[len(try)-1] == cur[len(cur)-1] && fails(try) {
				cur, found = try, true
				continue
			}
			i += chunk
		}
	}
	if !found {
		return nil
	}
	return cur
}
