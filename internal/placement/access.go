package placement

import "github.com/epochfs/epochfs/internal/placement/catalog"

// Progress is the warmup's progress counting only the files of the set
// that who could open (root: all of them), so that a user's view never
// shows the number or size of files they may not see.
func (w *Warmups) Progress(who *catalog.Cred) WarmupProgress {
	if who.Root() {
		return w.progressAll()
	}
	return w.progress(w.cat.OpenerAs(who).MayOpen)
}

// WarmupRequest is one warmup document of one user's: each line's path is
// resolved to the files the user may open (Resolve) and vetted against the
// user's bound (Check) as it arrives, so that a shell's redirection hears
// of a refusal at its write; each close holds what the document asked for
// so far (Hold: counted in the progress, charged to the user, not queued);
// the document's end releases the holds (queued) or cancels them (nothing
// queued, nothing charged).
type WarmupRequest struct {
	w     *Warmups
	who   *catalog.Cred
	check *WarmupCheck
}

// Request starts a warmup document of who's.
func (w *Warmups) Request(who *catalog.Cred) *WarmupRequest {
	return &WarmupRequest{w: w, who: who, check: w.check(who)}
}

// Resolve is the files a line's dataset path names that the user may
// open, or ErrNoEntry (for a path they may not open too).
func (r *WarmupRequest) Resolve(path string) ([]*catalog.Entry, error) {
	return r.w.cat.ResolvePathsAs(r.who, []string{path})
}

// Check vets one line's files against the user's bound (ErrWarmupQuota).
func (r *WarmupRequest) Check(files []*catalog.Entry) error { return r.check.Add(files) }

// Hold holds files (all: every file the user may open; root's all: the
// whole dataset, and files a refresh adds later), charged to the user's
// bound (ErrWarmupQuota refuses them all), until the hold's Release
// queues them or its Cancel takes them back.
func (r *WarmupRequest) Hold(files []*catalog.Entry, all bool) (*WarmupHold, error) {
	if all && r.who.Root() {
		return r.w.hold(nil, true), nil
	}
	if all {
		files = r.w.cat.FilesAs(r.who)
	}
	undo, err := r.w.charge(r.who, files)
	if err != nil {
		return nil, err
	}
	h := r.w.hold(files, false)
	h.undo = undo
	return h, nil
}
