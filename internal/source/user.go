package source

import "context"

// userKey carries the uid of the user a source call is made for.
type userKey struct{}

// WithUser marks ctx as a request of user uid: the source bounds the
// calls one user other than root may leave stuck (Options.
// MaxStuckPerUser). Calls without it (background copies, root) count only
// against the global bound.
func WithUser(ctx context.Context, uid uint32) context.Context {
	return context.WithValue(ctx, userKey{}, uid)
}

// userOf is the non-root user ctx was made for, if any.
func userOf(ctx context.Context) (uint32, bool) {
	uid, ok := ctx.Value(userKey{}).(uint32)
	return uid, ok && uid != 0
}
