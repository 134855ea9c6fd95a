/*
 * bcryptprimitives.dll for Wine 8.0, which has none: Rust >= 1.78 executables for
 * x86_64-pc-windows-gnu import ProcessPrng from it, and without it they exit with code 53 before
 * main. This DLL exports ProcessPrng over RtlGenRandom (advapi32's SystemFunction036), which every
 * Wine has. scripts/build-windows builds it with mingw-w64 and puts it next to npugate-harness.exe.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* Fills data with cryptographically random bytes; TRUE on success, as Windows' own. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
