//go:build !unix

package value

// openNonBlock is 0 where the platform has no O_NONBLOCK; the mode check
// before the open is then the only guard against a named pipe.
const openNonBlock = 0
