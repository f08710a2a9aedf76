// rv32sim: cycle-accurate RV32IM simulator built from the PicoRV32 RTL
// (rtl/picorv32.v, verilated with --top-module picorv32).
//
// Timing model
// ------------
// * The core is PicoRV32 exactly as vendored: a multi-cycle, NON-pipelined
//   CPU (no overlap between instructions, no branch prediction, no caches).
//   Each instruction takes roughly 3-6 cycles plus its memory wait states;
//   MUL* run in the fast (single-cycle DSP-style) PCPI multiplier, DIV/REM
//   in the iterative ~32-cycle PCPI divider, shifts in the barrel shifter.
// * Memory: a flat 16 MiB zero-initialised byte array on the core's native
//   memory interface with a fixed latency of one wait state: mem_ready is
//   asserted on the clock edge after the one that first sees mem_valid,
//   and deasserted on the following edge -- the same handshake as
//   picorv32's testbench_ez.v.  Every instruction fetch, load and store
//   therefore costs the same; there is no cache, no burst, no contention.
// * cycles = rising clock edges from the release of reset up to and
//   including the edge at which the EXIT store is accepted.  Reset is held
//   for RESET_CYCLES edges that are not counted.  Registers start at zero
//   (Verilator randReset 0), so runs are fully deterministic.
//
// Memory map: [0, MEM_SIZE) RAM; a 32-bit store to EXIT_ADDR ends the run.
// Anything else outside RAM is a fault; `trap` from the core (ebreak, ecall,
// illegal or misaligned access) before an exit is a trap.
//
// Usage: rv32sim PROGRAM.bin [--load ADDR=FILE]... [--dump ADDR:LEN=FILE]...
//                            [--max-cycles N]
// Prints one JSON line on stdout; exit status 0 (exit), 1 (other), 2 (usage).

#include "Vpicorv32.h"
#include "Vpicorv32___024root.h"  // reg_pc, made public by tb/rv32sim.vlt
#include "verilated.h"

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

static const uint32_t MEM_SIZE = 0x01000000u;
static const uint32_t EXIT_ADDR = 0x10000000u;
static const int RESET_CYCLES = 8;

static std::vector<uint8_t> mem(MEM_SIZE, 0);

[[noreturn]] static void usage(const std::string &msg) {
    fprintf(stderr, "rv32sim: %s\n", msg.c_str());
    fprintf(stderr,
            "usage: rv32sim PROGRAM.bin [--load ADDR=FILE]... "
            "[--dump ADDR:LEN=FILE]... [--max-cycles N]\n");
    exit(2);
}

// Decimal or 0x-prefixed hex; the whole string must be consumed.
static bool parse_u64(const std::string &s, uint64_t &out) {
    if (s.empty()) return false;
    int base = 10;
    const char *p = s.c_str();
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        p += 2;
    }
    if (*p == '\0' || *p == '-' || *p == '+') return false;
    char *end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(p, &end, base);
    if (errno || *end != '\0') return false;
    out = v;
    return true;
}

static bool read_file(const std::string &path, std::vector<uint8_t> &buf) {
    FILE *f = fopen(path.c_str(), "rb");
    if (!f) return false;
    uint8_t tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf.insert(buf.end(), tmp, tmp + n);
    bool ok = !ferror(f);
    fclose(f);
    return ok;
}

static void load_at(uint64_t addr, const std::string &path, const std::string &arg) {
    std::vector<uint8_t> buf;
    if (!read_file(path, buf)) usage("cannot read file in argument '" + arg + "'");
    if (addr > MEM_SIZE || buf.size() > MEM_SIZE - addr)
        usage("file does not fit in memory in argument '" + arg + "'");
    if (!buf.empty()) memcpy(&mem[addr], buf.data(), buf.size());
}

struct Dump {
    uint64_t addr, len;
    std::string path;
};

int main(int argc, char **argv) {
    std::string program;
    std::vector<std::pair<uint64_t, std::string>> loads;
    std::vector<Dump> dumps;
    uint64_t max_cycles = 200000000ull;

    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto need = [&](const char *opt) -> std::string {
            if (i + 1 >= argc) usage(std::string("missing value for ") + opt);
            return argv[++i];
        };
        if (a == "--load") {
            std::string v = need("--load");
            size_t eq = v.find('=');
            uint64_t addr;
            if (eq == std::string::npos || !parse_u64(v.substr(0, eq), addr) || eq + 1 == v.size())
                usage("bad --load argument '" + v + "' (want ADDR=FILE)");
            loads.emplace_back(addr, v.substr(eq + 1));
        } else if (a == "--dump") {
            std::string v = need("--dump");
            size_t colon = v.find(':'), eq = v.find('=');
            Dump d;
            if (colon == std::string::npos || eq == std::string::npos || eq < colon ||
                !parse_u64(v.substr(0, colon), d.addr) ||
                !parse_u64(v.substr(colon + 1, eq - colon - 1), d.len) || eq + 1 == v.size())
                usage("bad --dump argument '" + v + "' (want ADDR:LEN=FILE)");
            if (d.addr > MEM_SIZE || d.len > MEM_SIZE - d.addr)
                usage("--dump range outside memory in '" + v + "'");
            d.path = v.substr(eq + 1);
            dumps.push_back(d);
        } else if (a == "--max-cycles") {
            std::string v = need("--max-cycles");
            if (!parse_u64(v, max_cycles) || max_cycles == 0)
                usage("bad --max-cycles argument '" + v + "'");
        } else if (a.size() > 1 && a[0] == '-') {
            usage("unknown option '" + a + "'");
        } else if (program.empty()) {
            program = a;
        } else {
            usage("unexpected argument '" + a + "'");
        }
    }
    if (program.empty()) usage("missing PROGRAM.bin");

    // Program first, so --load may deliberately overwrite parts of it.
    load_at(0, program, program);
    for (auto &l : loads) load_at(l.first, l.second, "--load " + l.second);

    auto ctx = std::make_unique<VerilatedContext>();
    ctx->randReset(0);  // uninitialised flops/regfile start at 0: determinism
    auto top = std::make_unique<Vpicorv32>(ctx.get());

    top->clk = 0;
    top->resetn = 0;
    top->mem_ready = 0;
    top->mem_rdata = 0;
    top->pcpi_wr = 0;
    top->pcpi_rd = 0;
    top->pcpi_wait = 0;
    top->pcpi_ready = 0;
    top->irq = 0;
    top->eval();

    enum { RUNNING, EXIT, FAULT, TRAP, TIMEOUT } status = RUNNING;
    uint32_t exit_code = 0, fault_addr = 0, fault_pc = 0, trap_pc = 0;
    uint64_t cycles = 0;

    for (int i = 0; i < RESET_CYCLES; i++) {
        top->clk = 1;
        top->eval();
        top->clk = 0;
        top->eval();
    }
    top->resetn = 1;
    top->eval();

    while (status == RUNNING) {
        // Memory side of this rising edge, computed from the values the core
        // drove before the edge (non-blocking semantics, like testbench_ez.v).
        uint8_t next_ready = 0;
        uint32_t next_rdata = top->mem_rdata;
        if (top->mem_valid && !top->mem_ready) {
            uint32_t addr = top->mem_addr;  // word aligned by the core
            uint8_t wstrb = top->mem_wstrb;
            if (addr == EXIT_ADDR && wstrb == 0xf) {
                exit_code = top->mem_wdata;
                status = EXIT;
            } else if (addr >= MEM_SIZE || MEM_SIZE - addr < 4) {
                // A bad fetch is its own PC; a bad load/store belongs to reg_pc.
                fault_addr = addr;
                fault_pc = top->mem_instr ? addr : top->rootp->picorv32__DOT__reg_pc;
                status = FAULT;
            } else {
                next_ready = 1;
                uint8_t *m = &mem[addr];
                next_rdata = (uint32_t)m[0] | (uint32_t)m[1] << 8 | (uint32_t)m[2] << 16 |
                             (uint32_t)m[3] << 24;
                uint32_t w = top->mem_wdata;
                for (int b = 0; b < 4; b++)
                    if (wstrb & (1u << b)) m[b] = (uint8_t)(w >> (8 * b));
            }
        }
        top->clk = 1;
        top->eval();
        cycles++;
        if (status != RUNNING) break;
        if (top->trap) {
            trap_pc = top->rootp->picorv32__DOT__reg_pc;
            status = TRAP;
            break;
        }
        top->mem_ready = next_ready;
        top->mem_rdata = next_rdata;
        top->clk = 0;
        top->eval();
        if (cycles >= max_cycles) status = TIMEOUT;
    }
    top->final();

    if (status == EXIT) {
        for (auto &d : dumps) {
            FILE *f = fopen(d.path.c_str(), "wb");
            if (!f || (d.len && fwrite(&mem[d.addr], 1, d.len, f) != d.len) || fclose(f) != 0) {
                fprintf(stderr, "rv32sim: cannot write dump file '%s'\n", d.path.c_str());
                return 2;
            }
        }
        printf("{\"status\":\"exit\",\"exit_code\":%" PRIu32 ",\"cycles\":%" PRIu64 "}\n",
               exit_code, cycles);
        return 0;
    }
    if (status == FAULT)
        printf("{\"status\":\"fault\",\"addr\":%" PRIu32 ",\"pc\":%" PRIu32
               ",\"cycles\":%" PRIu64 "}\n",
               fault_addr, fault_pc, cycles);
    else if (status == TRAP)
        // reg_pc holds the address of the instruction being executed (the
        // last fetch may already be the next one: the core prefetches).
        printf("{\"status\":\"trap\",\"pc\":%" PRIu32 ",\"cycles\":%" PRIu64 "}\n", trap_pc,
               cycles);
    else
        printf("{\"status\":\"timeout\",\"cycles\":%" PRIu64 "}\n", cycles);
    return 1;
}
