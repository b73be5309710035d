package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/cluster/peer"
	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/fs"
	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
	"github.com/epochfs/epochfs/internal/views"
)

// FromConfig is a mount's config as the daemon's Options: the one place
// the config's sections become each package's options. What a config does
// not hold is the caller's to set: Rescan, WaitWalk, Progress,
// SourceOptions.Patience, FUSE.NoPassthrough, FUSE.Version,
// FUSE.Readers (ProcsForTransport), ShutdownTimeout, RuntimeDir, ConfigID
// and Logger. An invalid value is ErrConfig.
func FromConfig(cfg config.Config) (Options, error) {
	validate, err := placement.ParseValidate(cfg.Placement.Validate)
	if err != nil {
		return Options{}, &configError{err}
	}
	var tiers []tier.Options
	var tierBytes int64
	for _, tc := range cfg.Tiers {
		tierBytes += tc.Quota.Bytes
		o := tier.Options{Name: tc.Name, Dir: tc.Path, Quota: tc.Quota.Bytes, RequireMount: tc.RequireMount}
		if tc.MinFree.IsPct {
			o.MinFreePct = tc.MinFree.Pct
		} else {
			o.MinFreeBytes = tc.MinFree.Bytes
		}
		tiers = append(tiers, o)
	}
	settings := ModelSettings(cfg.Model)
	return Options{
		Source: cfg.Source, Mountpoint: cfg.Mountpoint, StateDir: cfg.StateDir, Tiers: tiers,
		SourceOptions: source.Options{
			Bandwidth: cfg.Placement.SourceBandwidth.BytesPerSec,
			Timeout:   cfg.Placement.SourceTimeoutDuration(),
		},
		Placement: placement.Options{
			Workers: cfg.Placement.Workers, Validate: validate,
			ValidateTTL:      cfg.Placement.ValidateTTLDuration(),
			FillAfter:        cfg.Placement.FillAfter,
			RefreshRate:      cfg.Placement.RefreshRate,
			MaxDrop:          cfg.Placement.MaxDropFraction(),
			MaxWarmupPerUser: max(1, cfg.Placement.WarmupPerUserBytes(tierBytes)),
			BufferBytes:      cfg.Sampler.Buffer.Bytes,
		},
		Jobs: jobs.Options{Lookahead: cfg.Sampler.Lookahead, Lease: cfg.Sampler.LeaseDuration(),
			MaxJobsPerUser: cfg.Sampler.MaxJobsPerUser},
		FUSE:          fs.Options{Prewarm: cfg.Fuse.Prewarm, IoUring: fs.IoUringMode(cfg.Fuse.IoUring)},
		ModelSettings: &settings,
		WalkNames:     cfg.Placement.Walk == "names",
		Views:         viewsOptions(cfg.Preprocess),
		Metrics:       MetricsOptions{Listen: cfg.Metrics.Listen, Pprof: cfg.Metrics.Pprof},
		Cluster:       clusterOptions(cfg),
		PeerListen:    cfg.Cluster.PeerListen,
		PeerTLS:       peerTLS(cfg.Cluster),
	}, nil
}

// ConfigID identifies a configuration in the runtime record: a hash of
// what the daemon is started with (the log settings aside), so that a
// later mount of the same source with another configuration is told so.
func ConfigID(cfg config.Config) string {
	cfg.Log = config.Log{}
	data, _ := json.Marshal(cfg)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// NewLogger builds the one logger of the process from [log].
func NewLogger(c config.Log, w io.Writer) *zap.Logger {
	lvl := zapcore.InfoLevel
	_ = lvl.Set(c.Level)
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.Format == "json" {
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), lvl))
}

// PipelineOptions is the [preprocess] section's pipeline: the one place
// the config's keys become preprocess.Options (the daemon's views,
// `epochfs preprocess`, the model's profile).
func PipelineOptions(pc config.Preprocess) preprocess.Options {
	return preprocess.Options{Static: pc.Static, Augment: pc.Augment, Normalize: pc.Normalize,
		Output: pc.OutputOrDefault(), MaxPixels: pc.MaxPixels, FastUpsample: pc.FastUpsample}
}

// viewsOptions is the [preprocess] section for the daemon (nil: views off).
func viewsOptions(pc config.Preprocess) *views.Config {
	if !pc.ViewsOn() {
		return nil
	}
	budget := func(v config.Size) int64 {
		if v.Raw == "" {
			return -1
		}
		return v.Bytes
	}
	return &views.Config{
		Pipeline: PipelineOptions(pc),
		Seed:     pc.Seed, Workers: pc.Workers,
		DecodedBytes: budget(pc.DecodedCache), AugmentedBytes: budget(pc.AugmentedCache),
		DefaultDecoded: config.DefaultDecodedCache, DefaultAugmented: config.DefaultAugmentedCache,
		MaxBatchBytes: pc.MaxBatchBytes.Bytes,
	}
}

// clusterOptions is the [cluster] section for the daemon (nil: no cluster).
// A wait for another node's fill is bounded by the lease, and by half the
// source timeout so that a reader following the copy never times out.
func clusterOptions(cfg config.Config) *cluster.Options {
	cc := cfg.Cluster
	if !cc.On() {
		return nil
	}
	lease := cc.LeaseDuration()
	if lease <= 0 {
		lease = cluster.DefaultLease
	}
	wait := min(lease, cfg.Placement.SourceTimeoutDuration()/2)
	o := &cluster.Options{
		Addrs: cc.Redis, Username: cc.Username, PasswordFile: cc.PasswordFile, KeyFile: cc.KeyFile, Insecure: cc.Insecure,
		TLS: cc.TLS, CAFile: cc.CAFile, DatasetID: cc.DatasetOrDefault(), Quota: cc.TierQuota.Bytes,
		Timeout: cc.TimeoutDuration(), Lease: lease, MaxWait: wait,
		Data: cc.Data, Replicas: cc.Replicas,
	}
	if cc.Peers() {
		o.PeerAdvertise = cc.Advertise()
	}
	return o
}

// ModelSettings is the [model] section as the model's plain settings.
func ModelSettings(m config.Model) model.Settings {
	size := func(v config.Size) *float64 {
		if v.Raw == "" {
			return nil
		}
		f := float64(v.Bytes)
		return &f
	}
	rate := func(v config.Rate) *float64 {
		if v.Raw == "" {
			return nil
		}
		f := v.BytesPerSec
		return &f
	}
	return model.Settings{
		MemoryBudget: size(m.MemoryBudget), MemoryBudgetText: m.MemoryBudget.Raw,
		Inflation: m.Inflation, SampleBytes: size(m.SampleBytes), DatasetSamples: m.DatasetSamples,
		Nodes: m.Nodes, TGPU: m.TGPU, TDecodeAugment: m.TDecodeAugment, TAugment: m.TAugment,
		BPCIe: rate(m.BPCIe), BNIC: rate(m.BNIC), BCache: rate(m.BCache), BStorage: rate(m.BStorage),
		CPCIe: size(m.CPCIe), CNw: size(m.CNw), GPUsPerNode: m.GPUsPerNode, ModelBytes: size(m.ModelBytes),
		NVLink: m.NVLink.Mode, BatchSize: m.BatchSize, BNVMe: rate(m.BNVMe), SNVMe: size(m.SNVMe),
		Remote: m.Cache == "remote", Split: m.Split,
		Rules: m.Rules, Jobs: m.Jobs, DecodedBytes: size(m.DecodedBytes), AugmentedBytes: size(m.AugmentedBytes),
		ShareWindow: m.ShareWindow, IngestOnCPU: m.IngestOnCPU,
	}
}

// peerTLS is the peer port's TLS: with data = "peers" and tls = true, this
// node's certificate and key, the peers' checked against ca_file.
func peerTLS(cc config.Cluster) peer.TLSFiles {
	if !cc.Peers() || !cc.TLS {
		return peer.TLSFiles{}
	}
	return peer.TLSFiles{Cert: cc.PeerCertFile, Key: cc.PeerKeyFile, CA: cc.CAFile}
}
