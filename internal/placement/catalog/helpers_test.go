package catalog

import "github.com/epochfs/epochfs/internal/placement/internal/fixture"

// The shared fixtures (internal/placement/internal/fixture), by the names these
// tests use.
const liveness = fixture.Liveness

type dataset = fixture.Dataset

var (
	waitFor      = fixture.WaitFor
	fastDir      = fixture.FastDir
	content      = fixture.Content
	writeDataset = fixture.WriteDataset
	openSource   = fixture.OpenSource
)
