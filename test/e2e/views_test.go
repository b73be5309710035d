package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Decoded views with the static steps Resize(256) + CenterCrop(224) equal
// torchvision's within a mean absolute difference of 2 per image.
func TestDecodedViewsMatchTorchvision(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	src, mnt, paths := mountedWithConfig(t, 24, 3, "[preprocess]\nstatic = [\"resize:256\", \"center_crop:224\"]\n")
	script := `
import sys, numpy as np
from PIL import Image
from torchvision import transforms
tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
src, mnt = sys.argv[1], sys.argv[2]
worst = 0.0
for rel in sys.argv[3:]:
    view = np.load(f"{mnt}/.epochfs/views/decoded/{rel}.npy")
    ref = np.asarray(tf(Image.open(f"{src}/{rel}").convert("RGB")))
    assert view.shape == ref.shape == (224, 224, 3), (rel, view.shape, ref.shape)
    worst = max(worst, float(np.abs(view.astype(np.int16) - ref.astype(np.int16)).mean()))
print(worst)
`
	out, err := exec.Command(python, append([]string{"-c", script, src, mnt}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("compare with torchvision: %v\n%s", err, out)
	}
	worst, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		t.Fatalf("%s", out)
	}
	t.Logf("worst mean absolute difference over %d images: %.3f", len(paths), worst)
	if worst >= 2 {
		t.Fatalf("a decoded view differs from torchvision's Resize(256)+CenterCrop(224) by a mean of %.3f (want < 2)", worst)
	}
}
