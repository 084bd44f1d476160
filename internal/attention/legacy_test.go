package attention

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/config"
	"herd/internal/store"
)

func TestDecodeFormerEscalation(t *testing.T) {
	fired := `"open":true,"incarnation":"i1","since":"2030-01-02T03:04:05Z","fired_at":"2030-01-02T03:05:05Z","event_id":7`
	cases := []struct {
		name string
		row  string
		want map[string]*Delivery
	}{
		{"delivered", `{` + fired + `,"delivered":true,"attempts":1,"command_done":true,"webhook_done":true}`, nil},
		{"webhook owed", `{` + fired + `,"delivered":false,"attempts":2,"next_attempt":"2030-01-02T03:06:05Z","last_error":"webhook: 503","command_done":true}`,
			map[string]*Delivery{
				ChannelCommand: {Done: true},
				ChannelWebhook: {Attempts: 2, Next: time.Date(2030, 1, 2, 3, 6, 5, 0, time.UTC), LastError: "webhook: 503"},
			}},
		{"never tried", `{` + fired + `,"delivered":false,"attempts":0,"next_attempt":null,"last_error":""}`,
			map[string]*Delivery{ChannelCommand: {}, ChannelWebhook: {}}},
		{"not fired", `{"open":true,"incarnation":"i1","since":"2030-01-02T03:04:05Z","fired_at":null,"event_id":0,"delivered":false}`, nil},
		{"current layout", `{` + fired + `,"channels":{"webhook":{"done":true,"attempts":1}}}`,
			map[string]*Delivery{ChannelWebhook: {Done: true, Attempts: 1}}},
	}
	for _, c := range cases {
		ep, err := Decode(c.row)
		if err != nil {
			t.Fatalf("[%s] %v", c.name, err)
		}
		if diff := cmp.Diff(c.want, ep.Channels); diff != "" {
			t.Errorf("[%s] channels (-expected +got):\n%s", c.name, diff)
		}
	}
}

// TestMigrateFormerNotify: the former notifier's row is moved into one
// row per episode at the first look: a notification already sent is not
// sent again, what it still owed is delivered, and the old row is gone.
func TestMigrateFormerNotify(t *testing.T) {
	st := openStore(t)
	hook, hookGot := recorder(t)
	ntfy, ntfyGot := recorder(t)
	s := session(herd.StateRunning, herd.ActivityWaiting)
	put(t, st, s)
	since := time.Now().UTC().Add(-time.Minute)
	m := Compose(s, RuleWaiting, Cause{}, since)
	old := map[string]*legacyNotify{"w-0": {Incarnation: "i1", Need: RuleWaiting, Since: since, FiredAt: &since, Message: &m,
		Channels: map[string]*Delivery{ChannelWebhook: {Done: true, Attempts: 1}, ChannelNtfy: {Attempts: 1, LastError: "503"}}}}
	raw, err := jsonString(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(context.Background(), func(tx store.Tx) error { return tx.PutKV(legacyNotifyKey("h"), raw) }); err != nil {
		t.Fatal(err)
	}
	n := newTracker(st, config.Notify{Webhook: hook.URL, Ntfy: ntfy.URL})
	if err := n.look(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !n.Notified("w-0") {
		t.Error("[migrated] expected the episode open at once")
	}
	if err := n.flush(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(hookGot) != 0 || len(ntfyGot) != 1 {
		t.Errorf("[migrated] expected the webhook (done) left alone and ntfy (owed) delivered, got %d and %d requests", len(hookGot), len(ntfyGot))
	}
	err = st.View(context.Background(), func(tx store.Tx) error {
		if _, ok, err := tx.KV(legacyNotifyKey("h")); err != nil || ok {
			t.Errorf("[old row] expected it gone, got %v %v", ok, err)
		}
		keys, err := DecodeIndex(mustKV(t, tx, IndexKey("h")))
		// The escalation's episode of the same wait opened too (not yet fired).
		if want := []string{Key(TrackEscalation, "w-0", RuleWaiting), Key(TrackNotify, "w-0", RuleWaiting)}; err != nil || !cmp.Equal(keys, want) {
			t.Errorf("[index] expected %v, got %v %v", want, keys, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func mustKV(t *testing.T, tx store.Tx, key string) string {
	t.Helper()
	raw, _, err := tx.KV(key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
