package config

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// Cluster is the [cluster] section: the Redis Cluster the nodes of a job
// share (docs/cluster.md). Without redis the mount is a single node.
type Cluster struct {
	// Redis are seed addresses (host:port) of the cluster's nodes.
	Redis []string `toml:"redis"`
	// Username is the ACL user ("" is the default user).
	Username string `toml:"username"`
	// PasswordFile holds the password, one line. The password is never
	// given on the command line nor logged.
	PasswordFile string `toml:"password_file"`
	// KeyFile holds the key every stored chunk, manifest and the shared
	// catalog are sealed with (HMAC-SHA256), one line, the same on every
	// node. Both files must be root's with no group or other permissions.
	KeyFile string `toml:"key_file"`
	// Insecure allows a cluster without password_file and key_file.
	Insecure bool `toml:"insecure"`
	// TierQuota is the bytes of file data epochfs may keep in the
	// cluster, over every node ("0" keeps none: the catalog and jobs are
	// still shared).
	TierQuota Size `toml:"tier_quota"`
	// Dataset namespaces every key in the cluster (default: "default").
	// Nodes of one dataset give the same id; two datasets sharing a
	// cluster give different ones.
	Dataset string `toml:"dataset"`
	// TLS connects with TLS; CAFile is the PEM bundle of the servers'
	// CA (default: the system's roots).
	TLS    bool   `toml:"tls"`
	CAFile string `toml:"ca_file"`
	// Timeout bounds one cluster operation (default "1s").
	Timeout string `toml:"timeout"`
	// Lease is a fill lease's time to live, renewed while the fill runs;
	// it also bounds how long a node waits for another node's fill before
	// reading the source itself (default "10s").
	Lease string `toml:"lease"`
	// Data is where file bytes are kept: "redis" (default: chunks in the
	// cluster, within tier_quota) or "peers" (on the nodes' own tiers,
	// read from each other: a dataset larger than one node).
	Data string `toml:"data"`
	// PeerListen is the address this node serves its copies at (data =
	// "peers"); PeerAdvertise the host:port the other nodes reach it at
	// (default: peer_listen, which then must name a host).
	PeerListen    string `toml:"peer_listen"`
	PeerAdvertise string `toml:"peer_advertise"`
	// Replicas is how many more nodes than a file's owner keep it (data =
	// "peers"; default 0).
	Replicas int `toml:"replicas"`
	// PeerCertFile and PeerKeyFile are this node's certificate and key
	// for the peer port (data = "peers" with tls = true: the peers speak
	// TLS, their certificates checked against ca_file).
	PeerCertFile string `toml:"peer_cert_file"`
	PeerKeyFile  string `toml:"peer_key_file"`
}

// Data modes.
const (
	ClusterDataRedis = "redis"
	ClusterDataPeers = "peers"
)

// Peers reports whether file data stays on the nodes (data = "peers").
func (c *Cluster) Peers() bool { return c.Data == ClusterDataPeers }

// Advertise is the address the other nodes reach this node's peer server
// at.
func (c *Cluster) Advertise() string {
	if c.PeerAdvertise != "" {
		return c.PeerAdvertise
	}
	return c.PeerListen
}

// On reports whether the section configures a cluster.
func (c *Cluster) On() bool { return len(c.Redis) > 0 }

// DefaultClusterDataset is the key namespace when dataset is not set.
const DefaultClusterDataset = "default"

var clusterDataset = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// TimeoutDuration and LeaseDuration are the durations (Validate first; 0
// when not set).
func (c *Cluster) TimeoutDuration() time.Duration { d, _ := time.ParseDuration(c.Timeout); return d }
func (c *Cluster) LeaseDuration() time.Duration   { d, _ := time.ParseDuration(c.Lease); return d }

// DatasetOrDefault is the key namespace.
func (c *Cluster) DatasetOrDefault() string {
	if c.Dataset == "" {
		return DefaultClusterDataset
	}
	return c.Dataset
}

// Validate checks the [cluster] section.
func (c *Cluster) Validate() error {
	if !c.On() {
		for _, k := range []struct{ key, v string }{
			{"password_file", c.PasswordFile}, {"key_file", c.KeyFile}, {"tier_quota", c.TierQuota.Raw}, {"dataset", c.Dataset},
			{"ca_file", c.CAFile}, {"username", c.Username}, {"timeout", c.Timeout}, {"lease", c.Lease},
			{"data", c.Data}, {"peer_listen", c.PeerListen}, {"peer_advertise", c.PeerAdvertise},
			{"peer_cert_file", c.PeerCertFile}, {"peer_key_file", c.PeerKeyFile},
		} {
			if k.v != "" {
				return fmt.Errorf("cluster.%s is set but cluster.redis is not (give the seed addresses, e.g. redis = [\"node01:7000\"])", k.key)
			}
		}
		if c.TLS || c.Insecure {
			return fmt.Errorf("cluster.tls or cluster.insecure is set but cluster.redis is not")
		}
		if c.Replicas != 0 {
			return fmt.Errorf("cluster.replicas is set but cluster.redis is not")
		}
		return nil
	}
	for _, a := range c.Redis {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return fmt.Errorf("cluster.redis: %q: want HOST:PORT, e.g. \"node01:7000\"", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("cluster.redis: %q: port %q: want 1 to 65535", a, port)
		}
	}
	for _, f := range []struct{ key, v string }{{"password_file", c.PasswordFile}, {"key_file", c.KeyFile}} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			return fmt.Errorf("cluster.%s = %q: must be absolute", f.key, f.v)
		}
	}
	if err := c.validatePeers(); err != nil {
		return err
	}
	if c.TierQuota.Raw == "" && !c.Peers() {
		return fmt.Errorf("cluster.tier_quota: missing (the bytes of file data the cluster may hold, e.g. \"400GiB\"; \"0\" for none)")
	}
	if err := c.TierQuota.Err(); err != nil {
		return fmt.Errorf("cluster.tier_quota: %w", err)
	}
	if c.Dataset != "" && !clusterDataset.MatchString(c.Dataset) {
		return fmt.Errorf("cluster.dataset = %q: want 1-64 letters, digits, '.', '_' or '-'", c.Dataset)
	}
	if c.CAFile != "" {
		if !c.TLS {
			return fmt.Errorf("cluster.ca_file = %q: needs cluster.tls = true", c.CAFile)
		}
		if !filepath.IsAbs(c.CAFile) {
			return fmt.Errorf("cluster.ca_file = %q: must be absolute", c.CAFile)
		}
	}
	for _, d := range []struct{ key, v string }{{"timeout", c.Timeout}, {"lease", c.Lease}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil {
			return fmt.Errorf("cluster.%s = %q: want a duration such as \"1s\"", d.key, d.v)
		}
		if v < 10*time.Millisecond || v > time.Hour {
			return fmt.Errorf("cluster.%s = %q: want 10ms to 1h", d.key, d.v)
		}
	}
	if t, l := c.TimeoutDuration(), c.LeaseDuration(); t > 0 && l > 0 && l < 3*t {
		return fmt.Errorf("cluster.lease = %q: want at least 3 × cluster.timeout (%s): the lease is renewed every third of it", c.Lease, c.Timeout)
	}
	for _, f := range []struct{ key, v string }{{"password_file", c.PasswordFile}, {"key_file", c.KeyFile}} {
		if f.v == "" && !c.Insecure {
			return fmt.Errorf("cluster.%s: missing (a root-only file; without password_file and key_file anyone who can reach Redis can serve their bytes as dataset files: set insecure = true to accept that)", f.key)
		}
	}
	return nil
}

// validatePeers checks data and the peer addresses.
func (c *Cluster) validatePeers() error {
	switch c.Data {
	case "", ClusterDataRedis:
		for _, k := range []struct{ key, v string }{{"peer_listen", c.PeerListen}, {"peer_advertise", c.PeerAdvertise},
			{"peer_cert_file", c.PeerCertFile}, {"peer_key_file", c.PeerKeyFile}} {
			if k.v != "" {
				return fmt.Errorf("cluster.%s is set but cluster.data is not \"peers\"", k.key)
			}
		}
		if c.Replicas != 0 {
			return fmt.Errorf("cluster.replicas is set but cluster.data is not \"peers\"")
		}
		return nil
	case ClusterDataPeers:
	default:
		return fmt.Errorf("cluster.data = %q: want \"redis\" (file bytes in Redis) or \"peers\" (on the nodes, read from each other)", c.Data)
	}
	if c.PeerListen == "" {
		return fmt.Errorf("cluster.peer_listen: missing (data = \"peers\": the address this node serves its copies at, e.g. \"10.0.0.1:7070\")")
	}
	for _, a := range []struct{ key, v string }{{"peer_listen", c.PeerListen}, {"peer_advertise", c.PeerAdvertise}} {
		if a.v == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a.v)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("cluster.%s = %q: want HOST:PORT with a port of 1 to 65535", a.key, a.v)
		}
		if a.key == "peer_advertise" && host == "" {
			return fmt.Errorf("cluster.peer_advertise = %q: name the host the other nodes reach this node at", a.v)
		}
	}
	host, _, _ := net.SplitHostPort(c.Advertise())
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("cluster.peer_listen = %q listens on every address: set cluster.peer_advertise to the host:port the other nodes reach this node at", c.PeerListen)
	}
	if c.Replicas < 0 || c.Replicas > 8 {
		return fmt.Errorf("cluster.replicas = %d: want 0 to 8", c.Replicas)
	}
	for _, f := range []struct{ key, v string }{{"peer_cert_file", c.PeerCertFile}, {"peer_key_file", c.PeerKeyFile}} {
		switch {
		case c.TLS && f.v == "":
			return fmt.Errorf("cluster.%s: missing (tls = true with data = \"peers\": the peer port speaks TLS with this node's certificate)", f.key)
		case !c.TLS && f.v != "":
			return fmt.Errorf("cluster.%s is set but cluster.tls is not true", f.key)
		case f.v != "" && !filepath.IsAbs(f.v):
			return fmt.Errorf("cluster.%s = %q: must be absolute", f.key, f.v)
		}
	}
	if c.TierQuota.Raw != "" {
		return fmt.Errorf("cluster.tier_quota is set but data = \"peers\" keeps no file bytes in Redis (the nodes' tiers hold them)")
	}
	return nil
}
