package placement

import "github.com/epochfs/epochfs/internal/placement/catalog"

// WarmupProgressAs is WarmupProgress counting only the files of the warmup
// set that who could open (root: all of them), so that a user's view never
// shows the number or size of files they may not see.
func (p *Placer) WarmupProgressAs(who *catalog.Cred) WarmupProgress {
	if who.Root() {
		return p.warmupProgressAll()
	}
	return p.warmupProgress(p.cat.OpenerAs(who).MayOpen)
}
