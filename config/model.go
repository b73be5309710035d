package config

// Model is the [model] section: inputs of the DSI performance model.
// (Filled in by the model issue.)
type Model struct{}

// DefaultModel returns the [model] defaults.
func DefaultModel() Model { return Model{} }

// Validate checks the [model] section.
func (m *Model) Validate() error { return nil }
