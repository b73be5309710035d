package sampler

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseJobConfig(t *testing.T) {
	cfg, err := ParseJobConfig([]byte("# resnet\nbatch_size=256\n seed = 7 \nsampler=random\n\nsubset=train/n01/\nsubset=val\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := JobConfig{BatchSize: 256, Seed: 7, Kind: KindRandom, SubsetPrefixes: []string{"train/n01", "val"}}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
	cfg, err = ParseJobConfig(nil)
	if err != nil || !reflect.DeepEqual(cfg, JobConfig{BatchSize: DefaultBatchSize}) {
		t.Fatalf("empty config: %+v, %v", cfg, err)
	}
	cfg, _ = ParseJobConfig([]byte("subset=a\nsubset=all\n"))
	if cfg.SubsetPrefixes != nil {
		t.Fatalf("subset=all must mean every sample: %v", cfg.SubsetPrefixes)
	}
}

func TestParseJobConfigErrorsNameTheKeyAndValue(t *testing.T) {
	for in, want := range map[string]string{
		"bach_size=3":                `line 1: unknown key "bach_size"`,
		"batch_size=0":               `batch_size="0"`,
		"batch_size=-1":              `batch_size="-1"`,
		"batch_size=ten":             `batch_size="ten"`,
		"batch_size=99999999999":     `batch_size="99999999999"`,
		"seed=-4":                    `seed="-4"`,
		"sampler=lru":                `sampler="lru"`,
		"batch_size=1\nbatch_size=2": "line 2: batch_size given twice",
		"\n\nhello":                  `line 3: "hello" is not key=value`,
		"subset=../etc":              `subset="../etc"`,
		"subset=a/../../b":           `subset="a/../../b"`,
	} {
		_, err := ParseJobConfig([]byte(in))
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseJobConfig(%q) = %v, want an error containing %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
}

func TestMatchPrefixIsPerPathComponent(t *testing.T) {
	for _, c := range []struct {
		prefix, path string
		want         bool
	}{
		{"a/b", "a/b", true}, {"a/b", "a/b/c.jpg", true}, {"a/b", "a/bc", false}, {"a/b", "a", false},
	} {
		if got := MatchPrefix(c.prefix, c.path); got != c.want {
			t.Errorf("MatchPrefix(%q, %q) = %v", c.prefix, c.path, got)
		}
	}
}

func FuzzParseJobConfig(f *testing.F) {
	f.Add([]byte("batch_size=256\nseed=7\nsampler=ods\nsubset=train\n"))
	f.Add([]byte("batch_size=0"))
	f.Add([]byte("subset=all\n#x\n\n"))
	f.Add([]byte("sampler = sequential\r\nsubset=a/b/"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseJobConfig(b)
		if err != nil {
			if !errors.Is(err, ErrBadConfig) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: not ErrBadConfig or not one line", err)
			}
			return
		}
		if cfg.BatchSize <= 0 || cfg.BatchSize > MaxBatchSize || cfg.Kind > KindSequential {
			t.Fatalf("accepted %+v", cfg)
		}
		// What Format writes, ParseJobConfig reads back the same.
		again, err := ParseJobConfig([]byte(cfg.Format()))
		if err != nil || !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", cfg.Format(), again, err, cfg)
		}
	})
}
