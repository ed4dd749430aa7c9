package rootfs

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// capNames are the Linux capability numbers (linux/capability.h).
var capNames = map[string]uint{
	"cap_chown": 0, "cap_dac_override": 1, "cap_dac_read_search": 2, "cap_fowner": 3, "cap_fsetid": 4,
	"cap_kill": 5, "cap_setgid": 6, "cap_setuid": 7, "cap_setpcap": 8, "cap_linux_immutable": 9,
	"cap_net_bind_service": 10, "cap_net_broadcast": 11, "cap_net_admin": 12, "cap_net_raw": 13,
	"cap_ipc_lock": 14, "cap_ipc_owner": 15, "cap_sys_module": 16, "cap_sys_rawio": 17, "cap_sys_chroot": 18,
	"cap_sys_ptrace": 19, "cap_sys_pacct": 20, "cap_sys_admin": 21, "cap_sys_boot": 22, "cap_sys_nice": 23,
	"cap_sys_resource": 24, "cap_sys_time": 25, "cap_sys_tty_config": 26, "cap_mknod": 27, "cap_lease": 28,
	"cap_audit_write": 29, "cap_audit_control": 30, "cap_setfcap": 31, "cap_mac_override": 32,
	"cap_mac_admin": 33, "cap_syslog": 34, "cap_wake_alarm": 35, "cap_block_suspend": 36, "cap_audit_read": 37,
	"cap_perfmon": 38, "cap_bpf": 39, "cap_checkpoint_restore": 40,
}

const capLast = 40

// CapabilityXattr converts rpm's textual file capabilities (cap_to_text
// form, e.g. "cap_net_raw,cap_net_admin=ep" or "=ep") into the
// security.capability xattr value (struct vfs_cap_data, revision 2). An
// empty string means no capabilities (nil, nil).
func CapabilityXattr(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	var perm, inh uint64
	effective := false
	for _, clause := range strings.Fields(text) {
		i := strings.IndexAny(clause, "=+-")
		if i < 0 {
			return nil, fmt.Errorf("capabilities %q: clause %q has no operator", text, clause)
		}
		var set uint64
		names := clause[:i]
		if names == "" || names == "all" {
			set = 1<<(capLast+1) - 1
		} else {
			for _, n := range strings.Split(names, ",") {
				b, ok := capNames[strings.ToLower(n)]
				if !ok {
					return nil, fmt.Errorf("capabilities %q: unknown capability %q", text, n)
				}
				set |= 1 << b
			}
		}
		ops := clause[i:]
		for len(ops) > 0 {
			op := ops[0]
			j := 1
			for j < len(ops) && strings.IndexByte("=+-", ops[j]) < 0 {
				j++
			}
			flags := ops[1:j]
			ops = ops[j:]
			if op == '=' {
				perm &^= set
				inh &^= set
				if names == "" || names == "all" {
					effective = false
				}
			}
			for _, f := range flags {
				switch f {
				case 'e':
					effective = op != '-'
				case 'p':
					if op == '-' {
						perm &^= set
					} else {
						perm |= set
					}
				case 'i':
					if op == '-' {
						inh &^= set
					} else {
						inh |= set
					}
				default:
					return nil, fmt.Errorf("capabilities %q: unknown flag %q", text, f)
				}
			}
		}
	}
	if perm == 0 && inh == 0 {
		// "=" or "=ep" over nothing: rpm stores such empty sets; the kernel
		// needs no xattr for them.
		if !effective {
			return nil, nil
		}
	}
	b := make([]byte, 20)
	magic := uint32(0x02000000)
	if effective {
		magic |= 1
	}
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint32(b[4:], uint32(perm))
	binary.LittleEndian.PutUint32(b[8:], uint32(inh))
	binary.LittleEndian.PutUint32(b[12:], uint32(perm>>32))
	binary.LittleEndian.PutUint32(b[16:], uint32(inh>>32))
	return b, nil
}
