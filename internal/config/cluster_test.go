package config

import (
	"strings"
	"testing"
)

func TestClusterSectionIsValidatedNamingTheKey(t *testing.T) {
	ok := `
[cluster]
redis = ["node01:7000", "10.0.0.2:7000"]
password_file = "/etc/epochfs/redis.pass"
key_file = "/etc/epochfs/cluster.key"
tier_quota = "400GiB"
dataset = "imagenet-2012"
lease = "5s"
timeout = "500ms"
`
	cfg, err := Parse(Default(), ok, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Cluster.Validate(); err != nil {
		t.Fatalf("valid section refused: %v", err)
	}
	if cfg.Cluster.TierQuota.Bytes != 400<<30 || cfg.Cluster.DatasetOrDefault() != "imagenet-2012" {
		t.Errorf("parsed %+v", cfg.Cluster)
	}
	bad := map[string]string{
		`redis = ["node01"]` + "\ntier_quota = \"1GiB\"":                                "cluster.redis",
		`redis = ["node01:0"]` + "\ntier_quota = \"1GiB\"":                              "cluster.redis",
		`redis = ["node01:7000"]`:                                                       "cluster.tier_quota",
		`redis = ["n:1"]` + "\ntier_quota = \"lots\"":                                   "cluster.tier_quota",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\ndataset = \"a{b}\"":               "cluster.dataset",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\npassword_file = \"rel/pw\"":       "cluster.password_file",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\nca_file = \"/ca.pem\"":            "cluster.ca_file",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\nlease = \"1s\"\ntimeout = \"1s\"": "cluster.lease",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\ntimeout = \"forever\"":            "cluster.timeout",
		`tier_quota = "1GiB"`: "cluster.tier_quota",
		`tls = true`:          "cluster.tls",
		`insecure = true`:     "cluster.tls or cluster.insecure",
		`key_file = "/k"`:     "cluster.key_file",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\nkey_file = \"k\"":                    "cluster.key_file",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"":                                      "cluster.password_file: missing",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\npassword_file = \"/p\"":              "cluster.key_file: missing",
		`redis = ["n:1"]` + "\ntier_quota = \"1GiB\"\nkey_file = \"/k\"\ninsecure = false": "cluster.password_file: missing",
	}
	for text, want := range bad {
		cfg, err := Parse(Default(), "[cluster]\n"+text, "t")
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		err = cfg.Cluster.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v; want one starting with %s", text, err, want)
		}
	}
	// insecure = true is the only way to a cluster without both files.
	cfg, err = Parse(Default(), "[cluster]\nredis = [\"n:1\"]\ntier_quota = \"1GiB\"\ninsecure = true\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Cluster.Validate(); err != nil {
		t.Errorf("insecure = true without password_file and key_file refused: %v", err)
	}
}

func TestPeersSettingsAreValidatedNamingTheKey(t *testing.T) {
	base := "[cluster]\nredis = [\"n:1\"]\ninsecure = true\n"
	good := map[string]string{
		"data = \"peers\"\npeer_listen = \"10.0.0.1:7070\"":                                                               "10.0.0.1:7070",
		"data = \"peers\"\npeer_listen = \":7070\"\npeer_advertise = \"node01:7070\"\nreplicas = 1":                       "node01:7070",
		"data = \"peers\"\npeer_listen = \"0.0.0.0:7070\"\npeer_advertise = \"10.0.0.1:7070\"":                            "10.0.0.1:7070",
		"data = \"redis\"\ntier_quota = \"1GiB\"":                                                                         "",
		"data = \"peers\"\npeer_listen = \"h:7070\"\ntls = true\npeer_cert_file = \"/c.pem\"\npeer_key_file = \"/k.pem\"": "h:7070",
	}
	for text, adv := range good {
		cfg, err := Parse(Default(), base+text, "t")
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if err := cfg.Cluster.Validate(); err != nil {
			t.Errorf("%q refused: %v", text, err)
		}
		if cfg.Cluster.Peers() && cfg.Cluster.Advertise() != adv {
			t.Errorf("%q: advertises %q, want %q", text, cfg.Cluster.Advertise(), adv)
		}
	}
	bad := map[string]string{
		"data = \"disk\"":  "cluster.data",
		"data = \"peers\"": "cluster.peer_listen: missing",
		"data = \"peers\"\npeer_listen = \"10.0.0.1\"":                                                           "cluster.peer_listen",
		"data = \"peers\"\npeer_listen = \"10.0.0.1:0\"":                                                         "cluster.peer_listen",
		"data = \"peers\"\npeer_listen = \":7070\"":                                                              "cluster.peer_listen",
		"data = \"peers\"\npeer_listen = \"0.0.0.0:7070\"":                                                       "cluster.peer_listen",
		"data = \"peers\"\npeer_listen = \":7070\"\npeer_advertise = \":7070\"":                                  "cluster.peer_advertise",
		"data = \"peers\"\npeer_listen = \"h:7070\"\nreplicas = 9":                                               "cluster.replicas",
		"data = \"peers\"\npeer_listen = \"h:7070\"\ntier_quota = \"1GiB\"":                                      "cluster.tier_quota",
		"tier_quota = \"1GiB\"\npeer_listen = \"h:7070\"":                                                        "cluster.peer_listen",
		"tier_quota = \"1GiB\"\nreplicas = 1":                                                                    "cluster.replicas",
		"data = \"peers\"\npeer_listen = \"h:7070\"\ntls = true":                                                 "cluster.peer_cert_file: missing",
		"data = \"peers\"\npeer_listen = \"h:7070\"\npeer_cert_file = \"/c\"\npeer_key_file = \"/k\"":            "cluster.peer_cert_file is set but cluster.tls",
		"data = \"peers\"\npeer_listen = \"h:7070\"\ntls = true\npeer_cert_file = \"c\"\npeer_key_file = \"/k\"": "cluster.peer_cert_file = \"c\": must be absolute",
		"tier_quota = \"1GiB\"\npeer_key_file = \"/k\"":                                                          "cluster.peer_key_file",
	}
	for text, want := range bad {
		cfg, err := Parse(Default(), base+text, "t")
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		err = cfg.Cluster.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v; want one starting with %s", text, err, want)
		}
	}
}
