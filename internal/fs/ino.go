package fs

// The mount's inode numbers, in one place. The kernel's node IDs are
// these numbers (ExternalNodeID: fs.go), so two nodes must never share
// one unless they are one file (hard links of the source do: catalog
// IDs are shared there, placement/catalog.go). Ranges, from the bottom:
//
//	1 .. 2^60-1           dataset entries: the catalog's IDs (root 1),
//	                      a file's later contents above 2^40 (fileIno)
//	2^60 + id<<44 + ID    a job's augmented/ tree (jobviews.go): job id,
//	                      then the catalog ID; 2^44 entries per job
//	2^61 + ID             views/decoded/ (views.go): the catalog ID
//	2^62 + k              .epochfs/ and its files (ctl.go)
//	2^62 + 2^40 + id<<24  a job's block (jobs.go: jobIno): its directory,
//	                      its entries, its ranks' directories and entries
//	2^62 + 2^41 + k       views/ and views/decoded (views.go)
const (
	// inoAugmentedBase: a job's augmented/ tree takes catalog IDs above
	// it, per job (job id << 44 keeps trees apart).
	inoAugmentedBase = 1 << 60
	// inoViewBase: views/decoded/ entries are it + the catalog ID.
	inoViewBase = 1 << 61
	// inoJobBase and inoJobShift: job id i has the block jobIno(i) ..
	// jobIno(i)+2^24-1: its directory at the base, its entries at +1+k
	// (k: the index in jobEntries), rank R's directory at +(R+1)<<8 and
	// its entries at +1+k (rankEntries). 4096 ranks of 255 entries each
	// fit.
	inoJobBase  = 1<<62 + 1<<40
	inoJobShift = 24
)

// Inode numbers of the control surface.
const (
	inoCtlDir = 1<<62 + iota
	inoStatus
	inoStatsJSON
	inoWarmup
	inoErrors
	inoModel
	inoJobsDir
	inoRefresh
	inoVerify
	inoDrop
)

// Inode numbers of views/ and views/decoded.
const (
	inoViewsDir   = 1<<62 + 1<<41 + iota
	inoViewsDecod = 1<<62 + 1<<41 + 1
)

func jobIno(id uint64) uint64 { return inoJobBase + id<<inoJobShift }

// Each content of a dataset file is an inode of its own. When the source
// file changes (catalog.Entry.Version), its path is looked up anew to a
// new inode, while handles and mappings of the old content keep the old
// inode: its attributes, its page cache and the backing file of its
// passthrough opens are that content's, so that no reader sees pages or
// a size of one content with bytes of another. Version v of the entry
// with catalog ID id is id + (1 + (v-1) mod (2^20-1)) << 40: a number
// comes back after 2^20-1 changes of one file in one mount (and entries
// with IDs of 2^40 and above, which no catalog reaches, keep one inode).
const (
	inoVersionShift = 40
	inoVersions     = 1<<20 - 1
)

// fileIno is the inode number of version ver of the entry with ID id.
func fileIno(id uint64, ver uint32) uint64 {
	if ver == 0 || id >= 1<<inoVersionShift {
		return id
	}
	return id + (1+(uint64(ver)-1)%inoVersions)<<inoVersionShift
}
