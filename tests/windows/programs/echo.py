"""Stand-in child: copy stdin to stdout byte for byte, report on stderr (bytes read, its console window handle),
exit with the code in argv[1]."""

import ctypes
import sys

assert sys.platform == "win32"

data = sys.stdin.buffer.read()
sys.stdout.buffer.write(data)
sys.stdout.buffer.flush()
window = ctypes.windll.kernel32.GetConsoleWindow()  # CREATE_NO_WINDOW: none
sys.stderr.buffer.write(b"echo: %d bytes, console window %d\n" % (len(data), window or 0))
sys.stderr.buffer.flush()
# ExitProcess takes the full unsigned 32-bit code (an NTSTATUS such as 0xC000013A), which sys.exit cannot.
ctypes.windll.kernel32.ExitProcess(ctypes.c_uint(int(sys.argv[1], 0)))
