package fs

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
)

// Documents of writable control files.
//
// Everything written through one open of a ctl file is one document,
// however the writer splits it into write(2) calls: bash's printf writes a
// line per call, find and Python write 4 KiB or 8 KiB blocks that split
// lines, dash writes once. A line is complete at its newline, or when a
// descriptor of the open file is closed.
//
// The kernel sends FLUSH at every close(2) of a descriptor of the open file
// (a shell's dup2 and close of the redirection included, before anything
// is written) and waits for its answer, which close returns; RELEASE comes
// once, after the last close, asynchronously, with no way to return an
// error. A descriptor may be shared by several processes: in
// "{ find a; echo b; find c; } > warmup" each find's exit closes one, and
// the document goes on. So:
//
//   - errors are returned by the write that completes a bad line (the shell
//     prints "Invalid argument" and exits 1, however it splits its writes),
//     or by the close that ends a bad last line;
//   - at each close, the document so far takes effect in a way a later
//     rejection can undo (a job's config is replaced and can be put back;
//     warmup paths are held: counted in progress, not yet queued), before
//     close returns, so a script that reads the file next sees it;
//   - at the release, what is held is done (warmup queues its files,
//     refresh and verify start).
//
// A rejected document changes nothing: its sink undoes what it did, and
// every later write and close of the same open fails with the errno of the
// refusal (EINVAL for a bad line).

// docSink gives a document its meaning (warmup paths, a job's config).
type docSink interface {
	// line takes one complete line, without its newline; it must not
	// keep l. An error rejects the document.
	line(l []byte) error
	// written is called after each write, once its complete lines are
	// taken.
	written() error
	// commit is called at each close of a descriptor of the open file
	// that wrote something since the last: what the document says so
	// far takes effect, undoably.
	commit() error
	// release is called once, at the end of a document that was not
	// rejected: what commit did is made final.
	release() error
	// held is about the bytes the sink holds now for the document (its
	// lines, the files they name), counted in the writer's budget.
	held() int
	// abort undoes what written and commit did: the document was
	// rejected.
	abort()
}

// document accumulates one open's writes into lines for its sink. Not safe
// for concurrent use (the handle locks).
type document struct {
	sink docSink
	// budget is the writer's (nil: none, root's documents), charged
	// what the document holds after each write and commit, and given
	// it back at the document's end.
	budget  *docBudget
	uid     uint32
	charged int
	max     int    // bytes a document may hold
	lineMax int    // bytes a line may hold (0: max)
	tail    []byte // the incomplete last line
	size    int    // bytes written so far
	dirty   bool   // written since the last commit
	err     error  // why the document was rejected
	// refused counts the writes refused after the rejection, not yet
	// reported.
	refused int
}

func newDocument(sink docSink, max int) *document { return &document{sink: sink, max: max} }

// newBudgetedDocument is a document of user uid, charged to b.
func newBudgetedDocument(sink docSink, max int, b *docBudget, uid uint32) *document {
	d := newDocument(sink, max)
	if uid != 0 {
		d.budget, d.uid = b, uid
	}
	return d
}

// write takes one write(2) call's bytes.
func (d *document) write(data []byte) error {
	if d.err != nil {
		d.refused++
		return d.rejected()
	}
	if len(data) > d.max-d.size {
		return d.fail(invalid("document larger than %s: write it in several opens", sizeText(d.max)))
	}
	if d.budget != nil {
		// The write's bytes are charged before they are kept: a user at
		// the budget makes the daemon allocate nothing more.
		if err := d.budget.take(d.uid, len(data)); err != nil {
			return d.fail(err)
		}
		d.charged += len(data)
	}
	d.size += len(data)
	d.dirty = d.dirty || len(data) > 0
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(d.tail)+len(data) > d.maxLine() {
				return d.fail(invalid("a line longer than %s", sizeText(d.maxLine())))
			}
			d.tail = append(d.tail, data...)
			break
		}
		l := data[:i]
		if len(d.tail)+len(l) > d.maxLine() {
			return d.fail(invalid("a line longer than %s", sizeText(d.maxLine())))
		}
		if len(d.tail) > 0 {
			d.tail = append(d.tail, l...)
			l = d.tail
		}
		err := d.sink.line(l)
		d.tail = d.tail[:0]
		if err != nil {
			return d.fail(err)
		}
		// What the line made the sink hold (a directory's files) is
		// charged at once, not after the write's other lines.
		if err := d.grew(); err != nil {
			return err
		}
		data = data[i+1:]
	}
	if err := d.sink.written(); err != nil {
		return d.fail(err)
	}
	return d.settle()
}

// maxLine bounds one line (and an unfinished one): a path line is a path,
// not a store of bytes.
func (d *document) maxLine() int {
	if d.lineMax > 0 {
		return d.lineMax
	}
	return d.max
}

// grew charges what the document holds beyond what it was charged: past
// the budget it is rejected.
func (d *document) grew() error {
	if d.budget == nil {
		return nil
	}
	if now := cap(d.tail) + d.sink.held(); now > d.charged {
		if err := d.budget.take(d.uid, now-d.charged); err != nil {
			return d.fail(err)
		}
		d.charged = now
	}
	return nil
}

// settle charges the writer's budget what the document holds now (or
// gives back what it no longer holds); past the budget the document is
// rejected, and what it held is freed.
func (d *document) settle() error {
	if d.budget == nil {
		return nil
	}
	now := cap(d.tail) + d.sink.held()
	if err := d.budget.take(d.uid, now-d.charged); err != nil {
		return d.fail(err)
	}
	d.charged = now
	return nil
}

// settled gives back everything the document was charged: it ended.
func (d *document) settled() {
	if d.budget != nil && d.charged != 0 {
		d.budget.take(d.uid, -d.charged)
		d.charged = 0
	}
}

// close ends the document's current line and commits it (a FLUSH, or the
// RELEASE). A close with nothing written since the last is a no-op.
func (d *document) close() error {
	if d.err != nil {
		return d.rejected()
	}
	if !d.dirty {
		return nil
	}
	d.dirty = false
	if len(d.tail) > 0 {
		err := d.sink.line(d.tail)
		d.tail = nil
		if err != nil {
			return d.fail(err)
		}
	}
	if err := d.sink.commit(); err != nil {
		return d.fail(err)
	}
	return d.settle()
}

// release ends the document (the RELEASE): what no close applied is
// applied, and what was applied is made final.
func (d *document) release() error {
	defer d.settled()
	if err := d.close(); err != nil {
		return err
	}
	return d.sink.release()
}

func (d *document) fail(err error) error {
	d.err = err
	d.tail = nil
	d.sink.abort()
	d.settled()
	return err
}

// rejected is the error of the writes and closes after the rejection.
func (d *document) rejected() error {
	return fmt.Errorf("the document was rejected (%w): nothing of it was applied", d.err)
}

// takeRefused returns and resets the count of refusals not yet reported.
func (d *document) takeRefused() int {
	n := d.refused
	d.refused = 0
	return n
}

// lineError is a rejected line, numbered from 1 in its document.
func lineError(n int, line string, err error) error {
	if len(line) > 120 {
		line = line[:120] + "…"
	}
	return invalid("line %d %q: %v", n, line, err)
}

// sizeText renders a document bound.
func sizeText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// errDocBudget: a user's open documents hold all the bytes one user may
// (EDQUOT).
var errDocBudget = errors.New("the user's open ctl documents are at their budget")

// DefaultDocBudget is Options.DocBudget's default: twice the largest
// document, so that a user's largest warmup list and the files it names
// fit, and many documents held open do not.
const DefaultDocBudget = 2 * maxPathDoc

// docBudget bounds the bytes the open documents of each user (root
// aside) hold together, however many descriptors they open: one user
// cannot grow the root daemon by writing documents and keeping them open.
type docBudget struct {
	max  int
	mu   sync.Mutex
	used map[uint32]int
}

// take charges n bytes (n < 0 gives back) to uid; it refuses a charge
// past the budget and then changes nothing.
func (b *docBudget) take(uid uint32, n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.used[uid] + n
	if n > 0 && u > b.max {
		return fmt.Errorf("%w: uid %d's open documents would hold %s, past the %s one user may: close them before writing more",
			errDocBudget, uid, sizeText(u), sizeText(b.max))
	}
	if u <= 0 {
		delete(b.used, uid)
		return nil
	}
	if b.used == nil {
		b.used = map[uint32]int{}
	}
	b.used[uid] = u
	return nil
}

// total is what the open documents of every user hold now.
func (b *docBudget) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, u := range b.used {
		n += u
	}
	return n
}
