// Package cluster is what the nodes of one training job share through a
// Redis Cluster (github.com/redis/go-redis/v9, ClusterClient): a tier of
// whole files that whichever node reads a file from the source first stores
// for the others (tier.go, fill.go), the catalog of the source (catalog.go),
// and the epoch state of DDP jobs whose ranks run on several nodes
// (epochs.go). Nothing here is a protocol of our own between nodes: every
// decision that two nodes could race for is one Redis command or one Lua
// script on keys of one hash slot (SET NX, a compare-and-delete, a claim of
// samples), and everything a dead node leaves behind expires.
//
// The package knows nothing of FUSE, tiers or the catalog's format: the
// daemon adapts it to the small interfaces placement and jobs own.
//
// Failure model: the cluster is an accelerator, never a dependency of a
// read. Every operation runs under Options.Timeout; the health (health.go)
// counts failures, and while the cluster fails callers are told to skip it
// (Usable) and read the source. A probe every Options.ProbeInterval finds
// out when it is back. Keys are namespaced by the dataset id (internal/cluster/layout);
// every value read back is checked against its keyed MAC (mac.go).
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/layout"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Errors. Open's errors match ErrConfig (the mount refuses to start,
// exit 2); the others are answers of single operations.
var (
	// ErrConfig marks a cluster the mount cannot use: bad options, an
	// unreadable password or CA file, seeds that do not answer, a wrong
	// password, a server that is not a Redis Cluster.
	ErrConfig = errors.New("cluster: configuration")
	// ErrUnreachable: no seed answered (matches ErrConfig at Open).
	ErrUnreachable = errors.New("cluster: no seed answered")
	// ErrAuth: the cluster refused the credentials (matches ErrConfig).
	ErrAuth = errors.New("cluster: authentication refused")
	// ErrNotCluster: the server answers but is not a Redis Cluster
	// (matches ErrConfig).
	ErrNotCluster = errors.New("cluster: not a Redis Cluster (cluster-enabled no)")

	// ErrDown: the cluster is failing; the operation was not tried.
	ErrDown = errors.New("cluster: unavailable")
	// ErrMiss: the cluster does not hold the file (or the catalog).
	ErrMiss = errors.New("cluster: not stored")
	// ErrBusy: another node holds the file's fill lease.
	ErrBusy = errors.New("cluster: another node is filling the file")
	// ErrFull: storing the file would exceed the cluster tier's quota.
	ErrFull = errors.New("cluster: tier quota reached")
	// ErrCorrupt: a stored value failed its MAC; it was dropped.
	ErrCorrupt = errors.New("cluster: stored value failed its MAC")
	// ErrLeaseLost: the fill lease expired before the fill was committed
	// (another node may be filling the file now).
	ErrLeaseLost = errors.New("cluster: fill lease lost")
	// ErrShape: a node joined a cluster job with another configuration.
	ErrShape = errors.New("cluster: the job runs with another configuration on other nodes")
	// ErrAhead: a claim would start an epoch two ahead of a rank that has
	// not ended its epoch; nothing was claimed.
	ErrAhead = errors.New("cluster: a rank of the job is two epochs behind")
)

// configError marks err as ErrConfig while keeping its own chain.
type configError struct{ err error }

func (e *configError) Error() string        { return e.err.Error() }
func (e *configError) Unwrap() error        { return e.err }
func (e *configError) Is(target error) bool { return target == ErrConfig }

// Defaults of Options.
const (
	DefaultLease         = 10 * time.Second
	DefaultTimeout       = time.Second
	DefaultMaxWait       = 10 * time.Second
	DefaultProbeInterval = time.Second
	DefaultJobTTL        = 24 * time.Hour
)

// Options configure Open. Addrs, DatasetID and Quota are required.
type Options struct {
	// Addrs are seed addresses (host:port) of the cluster's nodes; the
	// client discovers the rest.
	Addrs []string
	// Username is the ACL user ("": the default user).
	Username string
	// PasswordFile holds the password (one line; a trailing newline is
	// dropped). The password is never logged. Like KeyFile it must be
	// owned by the daemon's user and have no group or other permissions.
	PasswordFile string
	// KeyFile holds the key stored values are sealed with (mac.go): one
	// line of at least 32 characters, the same on every node.
	KeyFile string
	// Insecure opens a cluster without PasswordFile or KeyFile (without a
	// key the MACs catch damaged values, not forged ones).
	Insecure bool
	// TLS connects with TLS; CAFile, if set, is the PEM bundle that signs
	// the servers' certificates (otherwise the system's roots).
	TLS    bool
	CAFile string
	// DatasetID namespaces every key: two datasets never share a key.
	DatasetID string
	// Quota is the bytes of file data the cluster tier may hold, summed
	// over every node (a counter in the cluster); 0 stores nothing.
	Quota int64
	// Lease is a fill lease's time to live, renewed every third of it
	// while the fill runs (default DefaultLease).
	Lease time.Duration
	// Timeout bounds one operation (default DefaultTimeout).
	Timeout time.Duration
	// MaxWait bounds how long a node waits for another node's fill of a
	// file before it reads the source itself (default DefaultMaxWait).
	MaxWait time.Duration
	// ProbeInterval is how often the cluster's health is probed.
	ProbeInterval time.Duration
	// JobTTL: a cluster job's state expires this long after its last
	// claim (default DefaultJobTTL).
	JobTTL time.Duration
	// Data is where file bytes are kept: DataRedis (default: chunks in
	// the cluster, within Quota) or DataPeers (on the nodes' tiers, read
	// from each other: peers.go).
	Data string
	// PeerAdvertise is the host:port the other nodes reach this node's
	// peer server at (DataPeers): it names this node among the members.
	PeerAdvertise string
	// Replicas is how many more nodes than the owner keep each file
	// (DataPeers; 0 to 8).
	Replicas int
	// PeerTLS, if set, speaks HTTPS to the peers.
	PeerTLS *tls.Config
	// Node names this node in leases and logs (default host:pid:random).
	Node   string
	Logger *zap.Logger
}

var datasetID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidDatasetID reports whether id can namespace keys: 1-64 letters,
// digits, '.', '_' or '-' (no braces: a hash tag is ours to choose).
func ValidDatasetID(id string) bool { return datasetID.MatchString(id) }

// Cluster is an open connection to the Redis Cluster.
type Cluster struct {
	o    Options
	rdb  *redis.ClusterClient
	log  *zap.Logger
	keys layout.Keys
	seal sealer
	pr   *peers // data = "peers" (peers.go), or nil
	hl   health
	st   counters

	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Open connects to the cluster and checks that it is one, that it takes
// the credentials and that at least one seed answers. A cluster that
// answers but has a master down opens (reads fall back to the source until
// it is whole again). Every error matches ErrConfig and is one line.
func Open(ctx context.Context, o Options) (*Cluster, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.JobTTL <= 0 {
		o.JobTTL = DefaultJobTTL
	}
	if o.Node == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		o.Node = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if len(o.Addrs) == 0 {
		return nil, &configError{errors.New("cluster: no seed address")}
	}
	if !ValidDatasetID(o.DatasetID) {
		return nil, &configError{fmt.Errorf("cluster: dataset id %q: want 1-64 letters, digits, '.', '_' or '-'", o.DatasetID)}
	}
	if o.Quota < 0 {
		return nil, &configError{fmt.Errorf("cluster: quota %d: negative", o.Quota)}
	}
	if !o.Insecure && (o.PasswordFile == "" || o.KeyFile == "") {
		return nil, &configError{errors.New("cluster: password_file and key_file are required (anyone who can write to the cluster could otherwise serve their bytes as dataset files); insecure = true opens it without them")}
	}
	var password string
	var err error
	if o.PasswordFile != "" {
		if password, err = readSecret("password_file", o.PasswordFile); err != nil {
			return nil, &configError{err}
		}
	}
	key := insecureKey
	if o.KeyFile != "" {
		if key, err = readKey(o.KeyFile); err != nil {
			return nil, &configError{err}
		}
	}
	var tlsConf *tls.Config
	if o.TLS {
		if tlsConf, err = tlsConfig(o.CAFile); err != nil {
			return nil, &configError{err}
		}
	} else if o.CAFile != "" {
		return nil, &configError{errors.New("cluster: ca_file is set but tls is off")}
	}
	copts := &redis.ClusterOptions{
		Addrs:    o.Addrs,
		Username: o.Username,
		Password: password,
		// Bounded everything: a dead master must cost a read at most one
		// timeout, and the health then routes reads around the cluster.
		DialTimeout:           o.Timeout,
		ReadTimeout:           o.Timeout,
		WriteTimeout:          o.Timeout,
		PoolTimeout:           o.Timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		MaxRedirects:          3,
		MinRetryBackoff:       10 * time.Millisecond,
		MaxRetryBackoff:       100 * time.Millisecond,
		TLSConfig:             tlsConf,
		DisableIdentity:       true,
		ClientName:            "epochfs",
	}
	c := &Cluster{o: o, log: o.Logger, keys: layout.New(o.DatasetID), seal: sealer{key: key, ns: o.DatasetID}}
	if err := c.openPeers(o, key); err != nil {
		return nil, &configError{err}
	}
	if err := check(ctx, copts); err != nil {
		return nil, &configError{err}
	}
	c.rdb = redis.NewClusterClient(copts)
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.hl.init()
	c.probe()
	if !c.hl.reachable.Load() {
		c.log.Warn("the cluster answers but is not whole; reading the source until it is", zap.String("why", c.hl.why()))
	}
	if c.pr != nil {
		c.heartbeat(false)
		c.wg.Add(1)
		go c.holderWriter()
	}
	c.wg.Add(1)
	go c.prober()
	return c, nil
}

// Close stops the prober and closes the connections.
func (c *Cluster) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.stop()
		c.wg.Wait()
		if c.pr != nil {
			c.heartbeat(true) // leave: the others take this node's share now
			c.pr.client.Close()
		}
		if cerr := c.rdb.Close(); cerr != nil {
			err = fmt.Errorf("cluster: close: %w", cerr)
		}
	})
	return err
}

// Node is this node's name in leases.
func (c *Cluster) Node() string { return c.o.Node }

// MaxWait is how long to wait for another node's fill.
func (c *Cluster) MaxWait() time.Duration { return c.o.MaxWait }

// DatasetID is the key namespace.
func (c *Cluster) DatasetID() string { return c.o.DatasetID }

// tlsConfig is the client's TLS configuration, with the CA bundle if given.
func tlsConfig(caFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return conf, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster: ca_file %s: no PEM certificate in it", caFile)
	}
	conf.RootCAs = pool
	return conf, nil
}

// check asks the seeds, one after another, whether they are cluster nodes
// that take the credentials. The first that answers decides; none
// answering is ErrUnreachable.
func check(ctx context.Context, copts *redis.ClusterOptions) error {
	var last error
	for _, addr := range copts.Addrs {
		cl := redis.NewClient(&redis.Options{
			Addr: addr, Username: copts.Username, Password: copts.Password, TLSConfig: copts.TLSConfig,
			DialTimeout: copts.DialTimeout, ReadTimeout: copts.ReadTimeout, WriteTimeout: copts.WriteTimeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true,
		})
		cctx, cancel := context.WithTimeout(ctx, 2*copts.DialTimeout)
		info, err := cl.ClusterInfo(cctx).Result()
		cancel()
		cl.Close()
		switch {
		case err == nil:
			if !strings.Contains(info, "cluster_known_nodes:") {
				return fmt.Errorf("%w: %s answered CLUSTER INFO without cluster state", ErrNotCluster, addr)
			}
			return nil
		case redis.IsAuthError(err) || redis.IsPermissionError(err):
			return fmt.Errorf("%w by %s (check username and password_file)", ErrAuth, addr)
		case isProtocolAnswer(err):
			// The server answered with an error: cluster support is
			// disabled ("ERR This instance has cluster support disabled").
			return fmt.Errorf("%w: %s: %w", ErrNotCluster, addr, err)
		}
		last = fmt.Errorf("%s: %w", addr, err)
	}
	return fmt.Errorf("%w (%d seeds; last: %w)", ErrUnreachable, len(copts.Addrs), last)
}

// isProtocolAnswer reports whether err is an error reply of the server
// (not a failure to reach it).
func isProtocolAnswer(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// op returns a context bounded by the operation timeout.
func (c *Cluster) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.o.Timeout)
}

// QuietRedis drops go-redis's own log lines. go-redis prints its internal
// retries (a dial to a dead master, again and again) through a logger of
// its own, a package global: the health (health.go) says what matters
// once, through our logger. A process-wide setting, so the daemon's main
// sets it (cmd/epochfs), not Open.
func QuietRedis() { redis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...interface{}) {}

// FileKey names one version of a dataset file (its keys: layout.Keys.File).
type FileKey = layout.FileKey
