package e2e

import (
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/ctlpath"
)

// The epochfs Python package (python/): its unit tests with Debian's
// interpreter, its path rule against the daemon's (ctlpath) over random
// names, and `pip install ./python` into a fresh virtual environment.
func TestPythonPackage(t *testing.T) {
	requireTorch(t)
	pkg, _ := filepath.Abs("../../python")
	cases := filepath.Join(t.TempDir(), "quoted.jsonl")
	f, err := os.Create(cases)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	rng := rand.New(rand.NewPCG(7, 7))
	alphabet := []byte("ab/#\" \t\n\\\x01\x7f\xe9\xc3\xa9.")
	for i := 0; i < 2000; i++ {
		b := make([]byte, 1+rng.IntN(12))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if strings.ContainsRune(string(b), 0) {
			continue
		}
		enc.Encode(map[string]string{"name": hex.EncodeToString(b), "quoted": ctlpath.Quote(string(b))})
	}
	f.Close()
	cmd := exec.Command(python, "-m", "unittest", "discover", "-v", "-s", filepath.Join(pkg, "tests"))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pkg, "EPOCHFS_QUOTED="+cases)
	if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "skipped") {
		t.Fatalf("python unit tests: %v\n%s", err, out)
	}

	// pip install ./python, without the network (Debian's setuptools builds it).
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(python, "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		skipOrFail(t, "python3 -m venv (install python3-venv): %v: %s", err, out)
	}
	// From a copy: an in-tree build leaves build/ and *.egg-info behind.
	copyDir := filepath.Join(t.TempDir(), "python")
	if out, err := exec.Command("cp", "-r", pkg, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation", "--quiet", copyDir)
	pip.Dir = t.TempDir() // not the source tree
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install ./python: %v\n%s", err, out)
	}
	imp := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"import epochfs, torch; print(epochfs.__file__); print(epochfs.Sampler.__name__)")
	imp.Dir = t.TempDir()
	out, err := imp.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), venv) || !strings.Contains(string(out), "Sampler") {
		t.Fatalf("import of the installed package: %v\n%s", err, out)
	}

	// Without pip: a .pth file naming the source tree in the user's site
	// directory (python/README.md), with Debian's interpreter.
	userBase := t.TempDir()
	env := append(os.Environ(), "PYTHONUSERBASE="+userBase)
	siteCmd := exec.Command(python, "-m", "site", "--user-site")
	siteCmd.Env = env
	siteOut, err := siteCmd.Output()
	userSite := strings.TrimSpace(string(siteOut))
	if err != nil || !strings.HasPrefix(userSite, userBase) {
		t.Fatalf("python3 -m site --user-site: %v: %q", err, siteOut)
	}
	if err := os.MkdirAll(userSite, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(userSite, "epochfs.pth"), []byte(pkg+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	imp = exec.Command(python, "-c", "import epochfs, torch; print(epochfs.__file__); print(epochfs.Sampler.__name__)")
	imp.Env, imp.Dir = env, t.TempDir()
	out, err = imp.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), pkg) || !strings.Contains(string(out), "Sampler") {
		t.Fatalf("import through epochfs.pth: %v\n%s", err, out)
	}
}
