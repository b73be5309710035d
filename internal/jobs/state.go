package jobs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/sampler"
)

// A job's state document (jobs/NAME/state, written to a new job's
// resume; docs/sampling.md, "Resuming a job"): a few lines of text, the
// last of them a checksum of the others.
//
//	epochfs-state 1
//	job resnet50
//	sampler ods
//	seed 7
//	batch_size 256
//	world_size 4
//	drop_last false
//	samples 1281167 5c3e0d8a9f1b2c47 1281167
//	epoch 3 handed=640000 ranks=160000,160000,160000,160000
//	set 3 OjAAAAEAAAAAAB8AEAAAAAAAAQA…
//	check 7d1f09a2
//
// samples is the job's epoch samples, in path order, less those removed
// from the dataset: their count and the xxhash64 of their paths, and the
// number of files the mount had numbered (0 when some of the epoch's
// samples had been removed). Each
// epoch in flight (one, or two while a rank is an epoch ahead) has an
// epoch line (its number, the samples handed out, each rank's count) and
// a set line: the positions in that list of the samples handed out, a
// portable roaring bitmap in base64. check is the CRC-32C of every byte
// before it. Lines after check are not checked: "unread PATH" gives back a
// sample the state counts as handed out that the training script never
// used (a batch a data loader had read ahead), quoted as ctlpath quotes.

// stateVersion is the document version this package writes and reads.
const stateVersion = 1

// stateMagic starts every state document.
const stateMagic = "epochfs-state"

// maxStateEpochs bounds the epochs of a state: a job has two in flight at
// most.
const maxStateEpochs = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stateDoc is a state document, parsed.
type stateDoc struct {
	Job       string
	Kind      sampler.Kind
	Seed      uint64
	BatchSize int
	WorldSize int
	DropLast  bool
	Samples   int    // the epoch samples' count
	Hash      uint64 // and their paths' hash
	// Numbered is the number of files the saving mount had numbered,
	// when none of the epoch's samples was gone from the dataset then
	// (0 otherwise): on that mount, after a refresh, the files numbered
	// since are the ones it added (resume.go: sameMount).
	Numbered int
	Epochs   []stateEpoch
	Unread   []string // dataset paths given back
	Check    uint32   // the document's check
}

// stateEpoch is one epoch of a state.
type stateEpoch struct {
	Num    int
	Handed int   // samples handed out (Set's cardinality)
	Ranks  []int // per rank of the saving job, handed out in this run
	Set    *roaring.Bitmap
}

// format renders the document (without unread lines).
func (d *stateDoc) format() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d\n", stateMagic, stateVersion)
	fmt.Fprintf(&b, "job %s\n", ctlpath.Quote(d.Job))
	fmt.Fprintf(&b, "sampler %s\nseed %d\nbatch_size %d\nworld_size %d\ndrop_last %t\n",
		d.Kind, d.Seed, d.BatchSize, d.WorldSize, d.DropLast)
	fmt.Fprintf(&b, "samples %d %016x %d\n", d.Samples, d.Hash, d.Numbered)
	for _, ep := range d.Epochs {
		ranks := make([]string, len(ep.Ranks))
		for i, g := range ep.Ranks {
			ranks[i] = strconv.Itoa(g)
		}
		fmt.Fprintf(&b, "epoch %d handed=%d ranks=%s\n", ep.Num, ep.Handed, strings.Join(ranks, ","))
		ep.Set.RunOptimize()
		raw, err := ep.Set.ToBytes()
		if err != nil {
			return nil, fmt.Errorf("jobs: state of epoch %d: %w", ep.Num, err)
		}
		fmt.Fprintf(&b, "set %d %s\n", ep.Num, base64.StdEncoding.EncodeToString(raw))
	}
	fmt.Fprintf(&b, "check %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes(), nil
}

// stateError is a refused state: EINVAL with the reason.
func stateError(format string, args ...any) error {
	return fmt.Errorf("%w: state: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// parseState reads a state document. It checks the document's own
// consistency (version, checksum, syntax, counts); whether the state fits
// a job is the caller's.
func parseState(doc []byte) (*stateDoc, error) {
	body, tail, check, err := splitCheck(doc)
	if err != nil {
		return nil, err
	}
	d := &stateDoc{Check: check}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if err := d.parseHeader(lines); err != nil {
		return nil, err
	}
	rest := lines[stateHeaderLines:]
	if len(rest) == 0 || len(rest)%2 != 0 || len(rest) > 2*maxStateEpochs {
		return nil, stateError("%d lines after samples: want an epoch and a set line for each of 1 or 2 epochs", len(rest))
	}
	for i := 0; i < len(rest); i += 2 {
		ep, err := parseEpoch(rest[i], rest[i+1], d)
		if err != nil {
			return nil, err
		}
		if len(d.Epochs) > 0 && ep.Num != d.Epochs[0].Num+1 {
			return nil, stateError("epochs %d and %d: want consecutive epochs", d.Epochs[0].Num, ep.Num)
		}
		d.Epochs = append(d.Epochs, ep)
	}
	for _, l := range strings.Split(string(tail), "\n") {
		if l == "" {
			continue
		}
		p, ok := strings.CutPrefix(l, "unread ")
		if !ok {
			return nil, stateError("after check: %q: only unread PATH lines may follow it", clip(l))
		}
		p, err := ctlpath.Unquote(p)
		if err != nil {
			return nil, stateError("unread %q: %v", clip(l), err)
		}
		d.Unread = append(d.Unread, p)
	}
	return d, nil
}

// stateHeaderLines is the number of lines before a state's epochs.
const stateHeaderLines = 8

// parseHeader reads the lines before the epochs: the version, the job,
// the config's identity and the samples'.
func (d *stateDoc) parseHeader(lines []string) error {
	field := func(i int, key string) (string, error) {
		if i >= len(lines) {
			return "", stateError("no %s line", key)
		}
		v, ok := strings.CutPrefix(lines[i], key+" ")
		if !ok {
			return "", stateError("line %d: want %q, have %q", i+1, key, clip(lines[i]))
		}
		return v, nil
	}
	num := func(i int, key string, lo, hi int) (int, error) {
		v, err := field(i, key)
		if err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, stateError("%s %q: want a number in %d..%d", key, clip(v), lo, hi)
		}
		return n, nil
	}
	v, err := field(0, stateMagic)
	if err != nil {
		return stateError("not a state document (it starts %q)", clip(lines[0]))
	}
	if v != strconv.Itoa(stateVersion) {
		return stateError("version %q: this epochfs reads version %d", clip(v), stateVersion)
	}
	if v, err = field(1, "job"); err != nil {
		return err
	}
	if d.Job, err = ctlpath.Unquote(v); err != nil {
		return stateError("job name: %v", err)
	}
	if v, err = field(2, "sampler"); err != nil {
		return err
	}
	if d.Kind, err = parseKind(v); err != nil {
		return stateError("%v", err)
	}
	if v, err = field(3, "seed"); err != nil {
		return err
	}
	if d.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
		return stateError("seed %q: not a number", clip(v))
	}
	if d.BatchSize, err = num(4, "batch_size", 1, sampler.MaxBatchSize); err != nil {
		return err
	}
	if d.WorldSize, err = num(5, "world_size", 1, sampler.MaxWorldSize); err != nil {
		return err
	}
	if v, err = field(6, "drop_last"); err != nil {
		return err
	}
	if d.DropLast, err = strconv.ParseBool(v); err != nil {
		return stateError("drop_last %q: want true or false", clip(v))
	}
	if v, err = field(7, "samples"); err != nil {
		return err
	}
	f := strings.Split(v, " ")
	if len(f) != 3 {
		return stateError("samples %q: want a count, a 16-digit hash and a count of numbered files", clip(v))
	}
	n, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.ParseUint(f[1], 16, 64)
	numbered, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil || n < 1 || n > 1<<31-1 || len(f[1]) != 16 || numbered < 0 || numbered > 1<<31-1 {
		return stateError("samples %q: want a count, a 16-digit hash and a count of numbered files", clip(v))
	}
	d.Samples, d.Hash, d.Numbered = n, h, numbered
	return nil
}

// splitCheck finds the check line and verifies it: body is what it
// covers, tail the lines after it.
func splitCheck(doc []byte) (body, tail []byte, check uint32, err error) {
	i := bytes.Index(doc, []byte("\ncheck "))
	if i < 0 {
		return nil, nil, 0, stateError("no check line: the document is truncated or not a state")
	}
	body = doc[:i+1]
	line, tail, _ := bytes.Cut(doc[i+1:], []byte("\n"))
	want, err := strconv.ParseUint(strings.TrimPrefix(string(line), "check "), 16, 32)
	if err != nil || len(line) != len("check ")+8 {
		return nil, nil, 0, stateError("check line %q: want 8 hex digits", clip(string(line)))
	}
	if got := crc32.Checksum(body, castagnoli); uint32(want) != got {
		return nil, nil, 0, stateError("the check does not match (%08x, the lines above it give %08x): the document was changed or truncated", want, got)
	}
	return body, tail, uint32(want), nil
}

// parseEpoch reads an epoch's two lines.
func parseEpoch(line, set string, d *stateDoc) (stateEpoch, error) {
	var ep stateEpoch
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "epoch" || !strings.HasPrefix(f[2], "handed=") || !strings.HasPrefix(f[3], "ranks=") {
		return ep, stateError("%q: want epoch N handed=K ranks=G,G,…", clip(line))
	}
	var err error
	if ep.Num, err = strconv.Atoi(f[1]); err != nil || ep.Num < 1 {
		return ep, stateError("epoch %q: want a number from 1", clip(f[1]))
	}
	if ep.Handed, err = strconv.Atoi(f[2][len("handed="):]); err != nil || ep.Handed < 0 || ep.Handed > d.Samples {
		return ep, stateError("epoch %d: handed %q: want 0..%d", ep.Num, clip(f[2]), d.Samples)
	}
	ranks := strings.Split(f[3][len("ranks="):], ",")
	if len(ranks) != d.WorldSize {
		return ep, stateError("epoch %d: %d rank counts for world_size %d", ep.Num, len(ranks), d.WorldSize)
	}
	for _, r := range ranks {
		g, err := strconv.Atoi(r)
		if err != nil || g < 0 || g > d.Samples {
			return ep, stateError("epoch %d: rank count %q: want 0..%d", ep.Num, clip(r), d.Samples)
		}
		ep.Ranks = append(ep.Ranks, g)
	}
	v, ok := strings.CutPrefix(set, "set "+f[1]+" ")
	if !ok {
		return ep, stateError("after epoch %d: want its set line, have %q", ep.Num, clip(set))
	}
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return ep, stateError("set of epoch %d: %v", ep.Num, err)
	}
	if ep.Set, err = decodeBitmap(raw); err != nil {
		return ep, stateError("set of epoch %d: %v", ep.Num, err)
	}
	if c := ep.Set.GetCardinality(); c != uint64(ep.Handed) {
		return ep, stateError("set of epoch %d holds %d samples, its epoch line says %d", ep.Num, c, ep.Handed)
	}
	if ep.Handed > 0 && ep.Set.Maximum() >= uint32(d.Samples) {
		return ep, stateError("set of epoch %d names position %d of %d samples", ep.Num, ep.Set.Maximum(), d.Samples)
	}
	return ep, nil
}

// decodeBitmap reads a portable roaring bitmap, whatever its bytes: a
// malformed one is an error, never a panic.
func decodeBitmap(raw []byte) (b *roaring.Bitmap, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("malformed bitmap (%v)", r)
		}
	}()
	b = roaring.New()
	n, err := b.ReadFrom(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("malformed bitmap: %w", err)
	}
	if n != int64(len(raw)) {
		return nil, fmt.Errorf("malformed bitmap: %d bytes after it", int64(len(raw))-n)
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("malformed bitmap: %w", err)
	}
	return b, nil
}

// parseKind reads a sampler kind's name.
func parseKind(v string) (sampler.Kind, error) {
	for _, k := range sampler.Kinds() {
		if v == k.String() {
			return k, nil
		}
	}
	return 0, fmt.Errorf("sampler %q: want one of %s", clip(v), kindNames())
}
