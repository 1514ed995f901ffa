/* Entry for tiny guests: the VMM enters here in long mode with RSI = zero page (docs/vmm.md). */
	.section .text.start, "ax"
	.globl _start
_start:
	cli
	lea	stack_top(%rip), %rsp
	mov	%rsi, %rdi		/* main(boot_params) */
	call	main
	mov	%eax, %edi
	call	debug_exit
1:	hlt
	jmp	1b

	.bss
	.balign 16
	.space	16384
stack_top:
