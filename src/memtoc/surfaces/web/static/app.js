// memtoc web TOC browser (entry module)
