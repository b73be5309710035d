package main

// longHelp is each command's description: its man page's DESCRIPTION and
// the README's command table (make docs-check holds the two equal).
var longHelp = map[string]string{
	"mount":      "mount; returns once ready (the daemon logs to `STATE/epochfs.log`), or stays attached with `--foreground` (systemd `Type=notify`). A first mount serves while it walks the source, a later one while it loads the catalog; `--wait-walk` returns only once the walk (or load) is over. Safe in job prologs: a dataset already mounted is left as it is (exit 0), a dead mount is replaced, concurrent mounts wait for each other; `--user-ref ID` counts a job as a user, `--keep` (implied without `--user-ref`) never lets users unmount; `--no-passthrough` serves resident files through the daemon instead of FUSE passthrough",
	"unmount":    "unmount (`--config`: the config's mount point); exits 0 once the daemon has exited, 1 if it still runs after `--timeout` (default 30s); `--lazy` detaches a busy or dead mount; `--user-ref ID` unmounts only after the last user (an ID that is not a user changes nothing); nothing mounted is exit 0 with a note (2 with `--strict`); a mount that is not epochfs's is never unmounted (exit 2)",
	"status":     "the mount's status for people: dataset, resident share, each tier's use, the source's health and traffic, copies, jobs; `--raw` prints every key as `key=value` (what `.epochfs/status` holds: scripts use this), `--json` one JSON object",
	"stats":      "one line per second: resident share, source opens/s and MB/s, copies/s and MB/s, queue, source errors, jobs",
	"doctor":     "check a node without mounting: FUSE, passthrough and io_uring; the config; each tier (safe for a root daemon, owned by this catalog, on its own disk when `require_mount`, room for its quota); the source (readable, and a short speed probe); the state directory; the Slurm settings against the config; with MOUNTPOINT the live mount. One line per check, exit 1 if one failed",
	"list":       "every epochfs mount of the node: mount point, source, state directory, daemon pid, and `serving`, `dead` (its daemon died) or `draining` (detached, files still open)",
	"warmup":     "queue files for placement, with a progress bar; `-f LIST` reads more paths from a file, one per line (`-`: stdin; `-z`: NUL-separated, as `find -print0` writes)",
	"refresh":    "pick up files changed, added or removed on the source, without a remount (more than 10 % of the dataset removed at once only with `--allow-drop`)",
	"verify":     "compare the tier copies with the source; bad copies are copied again",
	"drop":       "remove tier copies on purpose (root only; nothing is ever evicted on its own): the files are read from the source, and copied again when next read or warmed",
	"model":      "the DSI performance model's memory split",
	"preprocess": "decode and augment images into `.npy`",
	"config":     "the paths a mount of FILE uses, resolved (scripts take the mount point from here)",
	"version":    "the version, the commit, the Go version and the build date",
	"completion": "the shell's completion script (the package installs them): commands, flags, mount points, paths under a mount for `warmup`, `refresh`, `verify`, `drop`",
}
