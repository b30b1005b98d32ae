/* bcryptprimitives.dll for Wine 8.0: the one function Rust-built Windows binaries import from it.

   Rust's standard library (1.78 and later) gets its random bytes from bcryptprimitives.dll!ProcessPrng, which
   Wine gained only after 8.0; without it, every Rust-built extension (pydantic-core, rpds-py, cryptography,
   pywinpty) fails to load with "DLL load failed ... Module not found". scripts/windows.sh builds this file
   with Debian's mingw-w64 and puts it into the Wine prefix's system32; real Windows ships its own and never
   sees this one (docs/guide/windows.md#maintaining-the-wine-suite). */
#include <windows.h>

/* RtlGenRandom is exported by advapi32 under this name (documented at
   https://learn.microsoft.com/windows/win32/api/ntsecapi/nf-ntsecapi-rtlgenrandom). */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* https://learn.microsoft.com/windows/win32/seccng/processprng: always returns TRUE on Windows; we report a
   failure of the underlying generator rather than hand out unfilled bytes. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size)
{
    while (size > 0) {
        ULONG chunk = size > 0x40000000 ? 0x40000000 : (ULONG)size;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        size -= chunk;
    }
    return TRUE;
}
