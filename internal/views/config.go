package views

import "github.com/epochfs/epochfs/internal/preprocess"

// Config is the mount's views config (.epochfs/views/ and the jobs'
// views), from [preprocess].
type Config struct {
	Pipeline preprocess.Options // the mount's default pipeline ([preprocess])
	Seed     uint64             // generation 0 of every augmentation
	Workers  int                // preprocessing workers (0: one per core)
	// DecodedBytes and AugmentedBytes are the caches' budgets; negative:
	// the model's share, or DefaultDecoded/DefaultAugmented without one
	// (package model/split decides).
	DecodedBytes, AugmentedBytes int64
	DefaultDecoded               int64
	DefaultAugmented             int64
	// MaxBatchBytes bounds one batch (jobs default if 0).
	MaxBatchBytes int64
}
