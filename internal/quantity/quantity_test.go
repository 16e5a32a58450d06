package quantity_test

import (
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/quantity"
)

func TestParseCPU(t *testing.T) {
	tests := []struct {
		in   string
		want quantity.Millicores
		str  string
	}{
		{"4", 4000, "4"}, {"4000m", 4000, "4"}, {"0.5", 500, "500m"}, {"250m", 250, "250m"}, {"0", 0, "0"},
	}
	for _, tt := range tests {
		got, err := quantity.ParseCPU(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseCPU(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if got.String() != tt.str {
			t.Errorf("ParseCPU(%q).String() = %q, want %q", tt.in, got.String(), tt.str)
		}
	}
	for _, bad := range []string{"", "four", "4 cores", "m", "NaN", "Inf"} {
		if _, err := quantity.ParseCPU(bad); err == nil {
			t.Errorf("ParseCPU(%q) accepted it", bad)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want quantity.Bytes
		str  string
	}{
		{"16Gi", 16 << 30, "16Gi"}, {"512Mi", 512 << 20, "512Mi"}, {"1G", 1e9, "1000000000"},
		{"1048576", 1 << 20, "1Mi"}, {"1.5Gi", 3 << 29, "1536Mi"},
	}
	for _, tt := range tests {
		got, err := quantity.ParseBytes(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", tt.in, int64(got), err, int64(tt.want))
		}
		if got.String() != tt.str {
			t.Errorf("ParseBytes(%q).String() = %q, want %q", tt.in, got.String(), tt.str)
		}
	}
	for _, bad := range []string{"", "16GB", "lots", "Gi", "1e30Ti"} {
		if _, err := quantity.ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted it", bad)
		}
	}
}

// TestParseMiB: a memory ceiling takes the units classes use, and a bare
// number is MiB, as guardrails were written before; it prints as classes do.
func TestParseMiB(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		str  string
	}{
		{"32Gi", 32768, "32Gi"}, {"32768", 32768, "32Gi"}, {"512Mi", 512, "512Mi"}, {"1536", 1536, "1536Mi"},
		{"1G", 954, "954Mi"}, {"1.5Gi", 1536, "1536Mi"}, {"512Ki", 1, "1Mi"},
	} {
		got, err := quantity.ParseMiB(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMiB(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if s := quantity.FormatMiB(got); s != tt.str {
			t.Errorf("FormatMiB(%d) = %q, want %q", got, s, tt.str)
		}
	}
	for _, bad := range []string{"", "32GB", "lots", "1e30Ti", "99999999999999999"} {
		if _, err := quantity.ParseMiB(bad); err == nil || !strings.Contains(err.Error(), "a bare number is MiB") {
			t.Errorf("ParseMiB(%q) = %v, want an error naming the units", bad, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		str  string
	}{
		{"8h", 8 * time.Hour, "8h"}, {"7d", 7 * 24 * time.Hour, "7d"}, {"1d12h", 36 * time.Hour, "36h"},
		{"90m", 90 * time.Minute, "90m"}, {"28d", 28 * 24 * time.Hour, "28d"},
	}
	for _, tt := range tests {
		got, err := quantity.ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if s := quantity.FormatDuration(got); s != tt.str {
			t.Errorf("FormatDuration(%v) = %q, want %q", got, s, tt.str)
		}
	}
	for _, bad := range []string{"", "d", "xd", "8", "soon", "1d2"} {
		if _, err := quantity.ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted it", bad)
		}
	}
}

func TestUSD(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{25, "$25.00"},
		{0.028, "$0.028"},
		{0.03, "$0.03"},
		{2.5, "$2.50"},
		{0, "$0.00"},
		{-0.0000000001, "$0.00"},
		{0.1 + 0.2, "$0.30"},
		{0.0000375, "$0.0000375"},
		{0.00000005, "$0.00000005"},
		{1234.5678, "$1234.5678"},
		{-1.5, "$-1.50"},
	} {
		if got := quantity.USD(c.v); got != c.want {
			t.Errorf("USD(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}
