//go:build race

package datagen

// raceEnabled: the race detector slows image code about tenfold, so tests
// render smaller pictures (same bits per pixel) under it.
const raceEnabled = true
