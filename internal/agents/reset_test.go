package agents

import (
	"testing"
	"time"
)

func TestParseResetTime(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 10, 0, 0, time.UTC)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	tests := []struct {
		text string
		want time.Time // zero: none
	}{
		{"Claude AI usage limit reached|1795370400", time.Unix(1795370400, 0)},
		{"You've hit your limit · resets 5pm", time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)},
		{"5-hour limit reached ∙ resets 3am", time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)},
		{"limit reached, resets at 5:30 PM (Europe/Berlin)", time.Date(2026, 11, 22, 17, 30, 0, 0, berlin)},
		{"resets 12am", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		{"resets 12pm (UTC)", time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)},
		{"reset at 16:45", time.Date(2026, 11, 22, 16, 45, 0, 0, time.UTC)},
		{"Please try again in 30 minutes.", now.Add(30 * time.Minute)},
		{"You’ve hit your usage limit. Try again at 5:00 PM.", time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)},
		{"rate limited, retry after 45 seconds", now.Add(45 * time.Second)},
		{"quota resets in 2h 15m", now.Add(2*time.Hour + 15*time.Minute)},
		{"This request would exceed your account's rate limit. Please try again later.", time.Time{}},
		{"resets 5", time.Time{}},
		{"resets 13pm", time.Time{}},
		{"resets at 5pm (Nowhere/Land)", time.Time{}},
		{"usage limit reached|1000000000", time.Time{}}, // in the past
		{"try again in 900 hours", time.Time{}},         // beyond a week
		{"", time.Time{}},
	}
	for _, tc := range tests {
		got, ok := ParseResetTime(tc.text, now)
		if ok != !tc.want.IsZero() || !got.Equal(tc.want) {
			t.Errorf("[%q] expected %v (ok=%v), got %v (ok=%v)", tc.text, tc.want, !tc.want.IsZero(), got, ok)
		}
	}
}

func TestIsRateLimit(t *testing.T) {
	for text, want := range map[string]bool{
		"API Error: Request rejected (429) · rate limit": true,
		"Claude AI usage limit reached|1795370400":       true,
		"RESOURCE_EXHAUSTED: quota":                      true,
		"API Error: 529 Overloaded":                      false,
		"API Error: Request rejected (429)":              true,
		"unexpected status 429 Too Many":                 true,
		"unexpected status 503 Service Unavailable: Overloaded, url: http://127.0.0.1:42959/v1/responses": false,
		"unexpected status 503, url: http://127.0.0.1:4290/v1":                                            false,
		"": false,
	} {
		if got := IsRateLimit(text); got != want {
			t.Errorf("[%q] expected %v, got %v", text, want, got)
		}
	}
}
