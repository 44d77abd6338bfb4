package memory

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiagnosticSwitches: the diagnostics' switches (EnvPoison,
// EnvMemoryCheck) read envSwitch's forms, and a value they cannot read
// is refused by Config.Validate, naming it, instead of leaving the
// diagnostic off unsaid (only "1" turned them on).
func TestDiagnosticSwitches(t *testing.T) {
	for _, name := range []string{EnvPoison, EnvMemoryCheck} {
		for _, on := range []string{"1", "true", "YES", "on"} {
			t.Setenv(name, on)
			require.True(t, envOn(name), "%s=%s", name, on)
			require.NoError(t, Config{}.Validate())
		}
		for _, off := range []string{"", "0", "false", "off"} {
			t.Setenv(name, off)
			require.False(t, envOn(name), "%s=%s", name, off)
			require.NoError(t, Config{}.Validate())
		}
		t.Setenv(name, "please")
		require.False(t, envOn(name))
		err := Config{}.Validate()
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, name)
		t.Setenv(name, "")
	}
}
