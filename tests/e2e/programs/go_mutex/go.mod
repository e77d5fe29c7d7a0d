module go_mutex

go 1.19
