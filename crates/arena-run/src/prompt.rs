//! The agent's prompt, in the sections of the AgentKernelArena paper: role, source files,
//! target kernels, GPU pre-check, instructions, completion rules, cheatsheet, workspace and the
//! iteration directive. A task's `prompt.instructions` replaces the default instructions.

use arena_task::Task;

use crate::agent::{Agent, REFERENCE, WORKSPACE};

const DEFAULT_INSTRUCTIONS: &str = "Make the target kernels faster while keeping their results \
correct on every shape the harness checks. Keep each kernel's name and signature. Do not change \
the harness, the reference implementation or the test shapes: the evaluation uses its own trusted \
copy of the harness, and only the source files listed above are taken from your workspace.";

pub fn prompt(task: &Task, agent: &Agent, gpu_kind: &str) -> String {
    let c = &task.config;
    let mut s = String::new();
    s.push_str(
        "# Role\n\nYou are an expert GPU kernel engineer. Your job is to optimize the \
                performance of the kernels of one task.\n\n",
    );
    s.push_str(
        "# Source files\n\nYou may edit only these files (paths relative to the workspace):\n\n",
    );
    for f in &task.agent_files {
        if arena_task::split::is_split(&task.dir, f) {
            s.push_str(&format!(
                "- `{f}`: the kernel, above the line of `#`s; the tests below that line are the \
                 task's, and the evaluation replaces them with its own copy\n"
            ));
        } else {
            s.push_str(&format!("- `{f}`\n"));
        }
    }
    if let Some(code) = &c.prompt.source_code {
        s.push_str(&format!("\n{code}\n"));
    }
    s.push_str("\n# Target kernels\n\n");
    for k in &c.target_kernel_functions {
        s.push_str(&format!("- `{k}`\n"));
    }
    s.push_str("\n# GPU pre-check\n\n");
    match gpu_kind {
        "nvidia" => s.push_str("One NVIDIA GPU is yours alone for this task. Check it first (`nvidia-smi` or `python3 -c 'import torch; print(torch.cuda.get_device_name())'`) and stop with a clear message if it is not usable.\n"),
        "amd" => s.push_str("One AMD GPU is yours alone for this task. Check it first (`rocm-smi` or `python3 -c 'import torch; print(torch.cuda.get_device_name())'`) and stop with a clear message if it is not usable.\n"),
        _ => s.push_str("This task runs on the CPU; no GPU is attached.\n"),
    }
    s.push_str("\n# Instructions\n\n");
    s.push_str(
        c.prompt
            .instructions
            .as_deref()
            .unwrap_or(DEFAULT_INSTRUCTIONS),
    );
    s.push_str("\n\n# How your work is checked\n\n");
    for (gate, cmds) in [
        ("compile", &c.compile_command),
        ("correctness", &c.correctness_command),
        ("performance", &c.performance_command),
    ] {
        for cmd in cmds {
            s.push_str(&format!("- {gate}: `{cmd}`\n"));
        }
    }
    s.push_str("\n# Completion rules\n\nYou are done when every gate passes in your workspace and the kernels are \
                as fast as you can make them. A kernel that fails compilation or correctness scores far \
                below the untouched original; never trade correctness for speed. Stop when you finish; \
                do not leave processes running.\n");
    if let Some(cs) = &c.prompt.cheatsheet {
        s.push_str(&format!("\n# Cheatsheet\n\n{cs}\n"));
    }
    s.push_str(&format!(
        "\n# Workspace\n\nYour workspace is `{WORKSPACE}` (read-write): the task's files, which you run the \
         commands above from. The untouched task is at `{REFERENCE}` (read-only).\n"
    ));
    s.push_str(&format!(
        "\n# Iteration directive\n\nWork in at most {} iterations of edit → compile → check → measure.\n",
        agent.max_iterations
    ));
    s
}
