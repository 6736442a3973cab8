// report/assets: the report page's script and style, built into the binary from report.js and report.css (the
// Makefile makes this object depend on them) so the page needs no file besides the chart library.
// Defines: dlp_report_js, dlp_report_css (NUL-terminated).
__asm__(".pushsection .rodata\n"
        ".global dlp_report_js\n"
        ".type dlp_report_js, @object\n"
        "dlp_report_js:\n"
        ".incbin \"src/report/report.js\"\n"
        ".byte 0\n"
        ".global dlp_report_css\n"
        ".type dlp_report_css, @object\n"
        "dlp_report_css:\n"
        ".incbin \"src/report/report.css\"\n"
        ".byte 0\n"
        ".popsection\n");
