# Test accuracy per epoch of fmnist-cnn: sequential vs 2-stage FBP and PipeDream
# (cleave train --log CSVs in this folder).  gnuplot bench/results/pipe/accuracy.gp
set datafile separator ","
set terminal pngcairo size 900,560
set output "bench/results/pipe/accuracy.png"
set title "fmnist-cnn, batch 64, 10 epochs: test accuracy"
set xlabel "epoch"
set ylabel "test accuracy"
set key bottom right
set grid
plot "bench/results/pipe/accuracy-sequential.csv" using 1:4 skip 1 with linespoints title "sequential", \
     "bench/results/pipe/accuracy-fbp.csv" using 1:4 skip 1 with linespoints title "FBP, 2 stages", \
     "bench/results/pipe/accuracy-pipedream.csv" using 1:4 skip 1 with linespoints title "PipeDream, 2 stages", \
     "bench/results/pipe/accuracy-cut5-fbp.csv" using 1:4 skip 1 with linespoints title "FBP, cut after pool2", \
     "bench/results/pipe/accuracy-cut5-pipedream.csv" using 1:4 skip 1 with linespoints title "PipeDream, cut after pool2"
