package main

// mount(8) runs /sbin/mount.TYPE for `mount -t TYPE`, an /etc/fstab line of
// that type and autofs maps: installed as /sbin/mount.epochfs (a link to
// this binary), epochfs mounts from fstab:
//
//	/lustre/imagenet  /mnt/imagenet  epochfs  config=/etc/epochfs/imagenet.toml,_netdev,nofail  0 0
//
// mount(8) calls `mount.epochfs SPEC DIR [-sfnv] [-o OPTIONS] [-t TYPE]`.
// SPEC is the source ("none" or "epochfs": the config's), DIR the mount
// point; OPTIONS are epochfs's mount flags (config=FILE, tier=NAME=PATH:QUOTA
// (repeatable), state=DIR, keep, user-ref=ID, wait-walk, no-passthrough,
// rescan) among the generic ones mount(8) and systemd pass along, which are
// ignored (defaults, ro, rw, auto, noauto, nofail, _netdev, user, x-*, ...).
// An unknown option is an error (exit 2) unless -s (sloppy).

import (
	"fmt"
	"io"
	"strings"

	"github.com/epochfs/epochfs/internal/config"
)

// helperName is the name mount(8) runs this binary under.
const helperName = "mount.epochfs"

// genericOptions are mount options that mean nothing to epochfs (mount(8)'s,
// systemd's and autofs's own): accepted and ignored.
var genericOptions = map[string]bool{
	"defaults": true, "ro": true, "rw": true, "auto": true, "noauto": true, "nofail": true,
	"_netdev": true, "user": true, "nouser": true, "users": true, "owner": true, "group": true,
	"exec": true, "noexec": true, "suid": true, "nosuid": true, "dev": true, "nodev": true,
	"atime": true, "noatime": true, "relatime": true, "nodiratime": true, "sync": true, "async": true,
	"loud": true, "silent": true,
}

// valueOptions are epochfs's options that take a value, and the mount flag
// each becomes; flagOptions those without one.
var (
	valueOptions = map[string]string{"config": "--config", "tier": "--tier", "state": "--state", "user-ref": "--user-ref"}
	flagOptions  = map[string]string{"keep": "--keep", "wait-walk": "--wait-walk", "no-passthrough": "--no-passthrough", "rescan": "--rescan"}
)

// runMountHelper is `mount.epochfs SPEC DIR [-sfnv] [-o OPTIONS] [-t TYPE]`.
func runMountHelper(args []string, stdout, stderr io.Writer) int {
	margs, fake, err := helperArgs(args)
	if err == nil && fake {
		fmt.Fprintf(stdout, "epochfs mount %s\n", strings.Join(margs, " "))
		return exitOK
	}
	if err == nil {
		_, err = execute(append([]string{"mount"}, margs...), stdout, stderr)
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", helperName, err)
	return exitCode(err)
}

// helperArgs turns mount(8)'s call into `epochfs mount` arguments; fake
// (-f) asks to do everything but the mount.
func helperArgs(args []string) (mount []string, fake bool, err error) {
	var pos []string
	var opts []string
	sloppy := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(args) {
				return nil, false, usageErr("%s needs a value", a)
			}
			i++
			switch a {
			case "-o":
				opts = append(opts, strings.Split(args[i], ",")...)
			case "-N":
				return nil, false, usageErr("-N (another mount namespace) is not supported")
			}
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			opts = append(opts, strings.Split(a[2:], ",")...)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				switch c {
				case 's':
					sloppy = true
				case 'f':
					fake = true
				case 'n', 'v':
				default:
					return nil, false, usageErr("unknown flag -%c (usage: %s SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS])", c, helperName)
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, false, usageErr("want SOURCE and MOUNTPOINT (usage: %s SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS])", helperName)
	}
	mount = []string{}
	cfgFile := ""
	for _, o := range opts {
		if o == "" {
			continue
		}
		name, val, hasVal := strings.Cut(o, "=")
		switch {
		case valueOptions[name] != "":
			if !hasVal || val == "" {
				return nil, false, usageErr("option %s needs a value (%s=...)", name, name)
			}
			if name == "config" {
				cfgFile = val
			}
			mount = append(mount, valueOptions[name], val)
		case flagOptions[name] != "" && !hasVal:
			mount = append(mount, flagOptions[name])
		case genericOptions[name] || strings.HasPrefix(name, "x-") || name == "comment":
		case sloppy:
		default:
			return nil, false, usageErr("unknown option %q (epochfs's: config=FILE, tier=NAME=PATH:QUOTA, state=DIR, keep, user-ref=ID, wait-walk, no-passthrough, rescan)", o)
		}
	}
	src := pos[0]
	if src == "none" || src == "epochfs" {
		// The source is the config's.
		if cfgFile == "" {
			return nil, false, usageErr("source %q: name the dataset, or give config=FILE with its source", src)
		}
		cfg, err := config.Load(cfgFile)
		if err != nil {
			return nil, false, usageErr("%v", err)
		}
		if cfg.Source == "" {
			return nil, false, usageErr("source %q: %s names no source either", src, cfgFile)
		}
		src = cfg.Source
	}
	return append(mount, src, pos[1]), fake, nil
}
