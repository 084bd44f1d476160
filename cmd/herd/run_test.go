package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"herd"
)

func TestPlaceRole(t *testing.T) {
	cases := []struct {
		name             string
		hosts            []string
		spread, failover bool
		want             herd.Role
		wantErr          string
		wantText         string
	}{
		{"no placement", nil, false, false, herd.Role{}, "", ""},
		{"hosts, spread, failover", []string{"hosta", " hostb"}, true, true,
			herd.Role{Hosts: []string{"hosta", "hostb"}, Spread: true, Failover: true}, "", ", hosts hosta,hostb, spread, failover"},
		{"spread alone", nil, true, false, herd.Role{Spread: true}, "", ", spread"},
		{"failover alone", nil, false, true, herd.Role{}, "--failover needs --hosts or --spread", ""},
		{"empty host", []string{"a", ""}, false, false, herd.Role{}, "an empty host name", ""},
		{"host twice", []string{"a", "a"}, false, false, herd.Role{}, `"a" is listed twice`, ""},
		{"white space", []string{"a b"}, false, false, herd.Role{}, "white space", ""},
	}
	for _, c := range cases {
		var r herd.Role
		err := placeRole(&r, c.hosts, c.spread, c.failover)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("[%s] expected an error containing %q, got %v", c.name, c.wantErr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("[%s] unexpected error %v", c.name, err)
			continue
		}
		if diff := cmp.Diff(c.want, r); diff != "" {
			t.Errorf("[%s] role (-want +got):\n%s", c.name, diff)
		}
		if got := runPlacementText(r); got != c.wantText {
			t.Errorf("[%s] text: expected %q, got %q", c.name, c.wantText, got)
		}
	}
}
