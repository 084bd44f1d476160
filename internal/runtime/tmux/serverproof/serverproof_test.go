package serverproof

import "testing"

func TestParseUnixTable(t *testing.T) {
	table := "Num       RefCount Protocol Flags    Type St Inode Path\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 101 /tmp/tmux-0/herd\n" +
		"0000000000000000: 00000003 00000000 00000000 0001 03 102 /tmp/tmux-0/herd\n" + // accepted connection
		"0000000000000000: 00000002 00000000 00010000 0001 01 103 /tmp/tmux-0/other\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 104 /tmp/tmux 0/with space\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 105\n" + // unbound
		"garbage line\n" +
		"0000000000000000: 00000002 00000000 zz010000 0001 01 106 /tmp/tmux-0/herd\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 x7 /tmp/tmux-0/herd\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 108 @/tmp/tmux-0/herd\n"
	tests := []struct {
		paths []string
		want  []uint64
	}{
		{[]string{"/tmp/tmux-0/herd"}, []uint64{101}},
		{[]string{"/tmp/tmux-0/other", "/tmp/tmux-0/herd"}, []uint64{101, 103}},
		{[]string{"/tmp/tmux 0/with space"}, []uint64{104}},
		{[]string{"/tmp/tmux-0/none"}, nil},
		{nil, nil},
	}
	for _, tt := range tests {
		got := parseUnixTable([]byte(table), tt.paths)
		if len(got) != len(tt.want) {
			t.Errorf("[%v] expected %v … got %v", tt.paths, tt.want, got)
			continue
		}
		for _, w := range tt.want {
			if !got[w] {
				t.Errorf("[%v] expected inode %d … got %v", tt.paths, w, got)
			}
		}
	}
}
